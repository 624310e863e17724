// The progress seam (progress.h): the calling thread's waiter and IoMutex's slow path.
#include "lib/progress.h"

#include "lib/block_device.h"

namespace vstack {
namespace {

thread_local ProgressWaiter* current_waiter = nullptr;

}  // namespace

ProgressWaiter* CurrentProgressWaiter() { return current_waiter; }

ProgressWaiter* SetProgressWaiter(ProgressWaiter* waiter) {
  ProgressWaiter* previous = current_waiter;
  current_waiter = waiter;
  return previous;
}

void IoMutex::LockSlow() {
  ProgressWaiter* w = CurrentProgressWaiter();
  if (w == nullptr) {
    mu_.lock();
    return;
  }
  while (!mu_.try_lock()) w->Wait("a lock held across I/O (IoMutex)");
}

std::unique_lock<IoMutex> LockQuiesced(IoMutex& mu, IoQueue& below) {
  std::unique_lock<IoMutex> lock(mu, std::try_to_lock);
  if (lock.owns_lock()) return lock;
  below.WaitIdle();
  lock.lock();
  return lock;
}

}  // namespace vstack
