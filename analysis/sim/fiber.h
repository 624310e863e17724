// Fiber: a stack of its own for one simulated thread, switched to and from on the calling OS
// thread (ucontext). The simulator runs every simulated thread as a fiber, so that a thread that
// waits in the middle of a layer's code (a synchronous metadata commit, a lock, a queue that is
// polled with nothing below in flight) simply suspends there while the others run: one OS
// thread, and no decision that is not the simulator's. AddressSanitizer is told about every
// switch, so its stack checks stay exact.
#ifndef VSTACK_ANALYSIS_SIM_FIBER_H_
#define VSTACK_ANALYSIS_SIM_FIBER_H_

#include <ucontext.h>

#include <cstddef>
#include <exception>
#include <functional>

namespace vstack::sim {

class Fiber {
 public:
  explicit Fiber(std::function<void()> body, size_t stack_bytes = size_t{512} << 10);
  // Frees the stack. A fiber destroyed while suspended mid-body leaks nothing of its own but
  // runs no destructor of what its stack holds: only do that to a fiber you abandon.
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Runs the fiber until it calls Suspend() or its body returns. From the main context only.
  void Resume();
  // Inside a fiber: returns to the context that resumed it.
  static void Suspend();
  // The fiber running now, or nullptr in the main context.
  static Fiber* Current();

  bool done() const { return done_; }
  // What the body threw, if it did (it then counts as done).
  std::exception_ptr error() const { return error_; }

 private:
  static void Entry(unsigned lo, unsigned hi);
  void SwitchOut();

  std::function<void()> body_;
  void* stack_ = nullptr;
  size_t stack_bytes_ = 0;
  size_t map_bytes_ = 0;
  ucontext_t context_{};
  ucontext_t caller_{};
  bool started_ = false;
  bool done_ = false;
  std::exception_ptr error_;
  // AddressSanitizer's view of the stacks (unused without it).
  void* fake_stack_ = nullptr;
  const void* caller_bottom_ = nullptr;
  size_t caller_size_ = 0;
};

}  // namespace vstack::sim

#endif  // VSTACK_ANALYSIS_SIM_FIBER_H_
