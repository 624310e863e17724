// The progress seam: every place where the library or a layer waits for work that another
// queue (or thread) does goes through here (docs/design.md, "Progress"):
//
//  - WaitForProgress(what): one step of a spin-wait, e.g. a queue polled while its requests
//    wait for another queue's metadata I/O (LayerQueue::DoPoll);
//  - IoMutex: a mutex its holder may keep across I/O (a synchronous metadata commit), so that
//    waiting for it is a wait for another queue's progress; LockQuiesced takes it as the
//    progress rule asks of a queue with requests in flight below;
//  - WaitUntil(cv, lock, pred, what): a condition-variable wait (a group commit's followers).
//
// Outside a simulation they do what they replace: yield the CPU, lock, wait on the condition
// variable. A simulator that drives every queue of a stack from one thread (analysis/sim)
// installs a ProgressWaiter on that thread: each wait then returns control to it, so it can run
// the other queues (and the simulated device) meanwhile, and it sees a wait that never ends
// (a liveness failure). A layer that waits any other way (a bare std::mutex held across I/O, a
// condition variable, a sleep) cannot be simulated: the one thread would block for good.
#ifndef VSTACK_LIB_PROGRESS_H_
#define VSTACK_LIB_PROGRESS_H_

#include <condition_variable>
#include <mutex>
#include <thread>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

class IoQueue;

class ProgressWaiter {
 public:
  virtual ~ProgressWaiter() = default;
  // The calling code can go on only once something else has happened: another queue made
  // progress, a lock was released, a request completed below. Returns when it may look again
  // (perhaps with nothing changed). `what` names the wait, for a liveness report: a string
  // literal.
  virtual void Wait(const char* what) = 0;
};

// The calling thread's waiter (nullptr: none, the default).
ProgressWaiter* CurrentProgressWaiter();
// Installs `waiter` for the calling thread (nullptr removes it); returns the previous one.
ProgressWaiter* SetProgressWaiter(ProgressWaiter* waiter);

// One step of a wait for another queue's progress: the waiter's Wait, or a CPU yield.
inline void WaitForProgress(const char* what) {
  if (ProgressWaiter* w = CurrentProgressWaiter()) {
    w->Wait(what);
  } else {
    std::this_thread::yield();
  }
}

// A mutex whose holder may wait for I/O while it holds it (a metadata commit). Locking it when
// it is taken waits through the seam under a simulator (the holder runs meanwhile), and blocks
// as std::mutex otherwise. Meets the Lockable requirements (std::lock_guard, std::unique_lock).
class IoMutex {
 public:
  void lock() {
    if (!mu_.try_lock()) LockSlow();
  }
  bool try_lock() { return mu_.try_lock(); }
  void unlock() { mu_.unlock(); }

 private:
  void LockSlow();
  std::mutex mu_;
};

// Locks `mu` for a queue that may have requests in flight on `below`, its queue of the device
// below. When another thread holds `mu`, first waits until nothing is in flight on `below`
// (WaitIdle), then locks: the holder's I/O may wait for one of those requests (a grain lock
// they hold, a write of theirs a commit must see), and only this thread reaps them (the
// progress rule of lib/block_device.h). Uncontended, it is a plain lock.
std::unique_lock<IoMutex> LockQuiesced(IoMutex& mu, IoQueue& below);

// cv.wait(lock, pred), through the seam under a simulator: the lock is released while the
// waiter runs other queues, and `pred` is checked again after each Wait.
template <typename Pred>
void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Pred pred,
               const char* what) {
  ProgressWaiter* w = CurrentProgressWaiter();
  if (w == nullptr) {
    cv.wait(lock, pred);
    return;
  }
  while (!pred()) {
    lock.unlock();
    w->Wait(what);
    lock.lock();
  }
}

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_PROGRESS_H_
