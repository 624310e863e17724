#include "lib/progress.h"

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

}  // namespace vstack
