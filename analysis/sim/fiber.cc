#include "analysis/sim/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#define VSTACK_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VSTACK_FIBER_ASAN 1
#endif
#endif

#ifdef VSTACK_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

namespace vstack::sim {
namespace {

thread_local Fiber* current_fiber = nullptr;

// Tells AddressSanitizer that this context is about to switch to the stack [bottom, +size);
// `save` keeps the leaving context's fake stack (nullptr: the leaving fiber is finished).
void StartSwitch(void** save, const void* bottom, size_t size) {
#ifdef VSTACK_FIBER_ASAN
  __sanitizer_start_switch_fiber(save, bottom, size);
#else
  (void)save, (void)bottom, (void)size;
#endif
}

// The switch into this context is done; reports the stack it came from.
void FinishSwitch(void* save, const void** bottom, size_t* size) {
#ifdef VSTACK_FIBER_ASAN
  __sanitizer_finish_switch_fiber(save, bottom, size);
#else
  (void)save, (void)bottom, (void)size;
#endif
}

}  // namespace

Fiber::Fiber(std::function<void()> body, size_t stack_bytes) : body_(std::move(body)) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
  map_bytes_ = stack_bytes_ + page;  // a guard page below the stack
  void* map = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (map == MAP_FAILED) {
    std::fprintf(stderr, "vstack sim: cannot map a fiber stack of %zu bytes\n", map_bytes_);
    std::abort();
  }
  mprotect(map, page, PROT_NONE);
  stack_ = static_cast<char*>(map) + page;
#ifdef VSTACK_FIBER_ASAN
  // A fiber's stack holds pointers as a thread's does: a run that hangs keeps its fibers
  // suspended for good (run.cc's graveyard), and what their frames point at (a stack half
  // opened when a reopen hung) is reachable, not leaked.
  __lsan_register_root_region(stack_, stack_bytes_);
#endif
}

Fiber::~Fiber() {
#ifdef VSTACK_FIBER_ASAN
  __lsan_unregister_root_region(stack_, stack_bytes_);
#endif
  munmap(static_cast<char*>(stack_) - (map_bytes_ - stack_bytes_), map_bytes_);
}

Fiber* Fiber::Current() { return current_fiber; }

void Fiber::Entry(unsigned lo, unsigned hi) {
  auto* self = reinterpret_cast<Fiber*>((uintptr_t{hi} << 32) | uintptr_t{lo});
  FinishSwitch(nullptr, &self->caller_bottom_, &self->caller_size_);
  try {
    self->body_();
  } catch (...) {
    self->error_ = std::current_exception();
  }
  self->done_ = true;
  current_fiber = nullptr;
  // The last switch out: nothing of this stack is needed again.
  StartSwitch(nullptr, self->caller_bottom_, self->caller_size_);
  setcontext(&self->caller_);
}

void Fiber::Resume() {
  if (done_) return;
  if (!started_) {
    started_ = true;
    getcontext(&context_);
    context_.uc_stack.ss_sp = stack_;
    context_.uc_stack.ss_size = stack_bytes_;
    context_.uc_link = nullptr;
    const auto p = reinterpret_cast<uintptr_t>(this);
    makecontext(&context_, reinterpret_cast<void (*)()>(&Fiber::Entry), 2,
                static_cast<unsigned>(p & 0xFFFFFFFFu), static_cast<unsigned>(p >> 32));
  }
  current_fiber = this;
  void* save = nullptr;
  StartSwitch(&save, stack_, stack_bytes_);
  swapcontext(&caller_, &context_);
  FinishSwitch(save, nullptr, nullptr);
  current_fiber = nullptr;
}

void Fiber::Suspend() {
  Fiber* self = current_fiber;
  if (self == nullptr) {
    std::fprintf(stderr, "vstack sim: Fiber::Suspend outside a fiber\n");
    std::abort();
  }
  self->SwitchOut();
}

void Fiber::SwitchOut() {
  StartSwitch(&fake_stack_, caller_bottom_, caller_size_);
  swapcontext(&context_, &caller_);
  FinishSwitch(fake_stack_, &caller_bottom_, &caller_size_);
  current_fiber = this;
}

}  // namespace vstack::sim
