// The calling thread's CPU tag (lib/cpu_account.h) as the library's own data path sees it: a
// plain thread-local pointer, read and written without a call. Not installed: code outside lib/
// uses CurrentCpuTag() and ScopedCpuTag.
#ifndef VSTACK_LIB_CPU_TAG_H_
#define VSTACK_LIB_CPU_TAG_H_

#include "lib/cpu_account.h"

namespace vstack::internal {

// The account the calling thread's CPU is charged to now; nullptr: its home account.
extern constinit thread_local CpuAccount* t_cpu_tag;

// Sets the tag for a scope and restores the caller's on exit.
class TagScope {
 public:
  explicit TagScope(CpuAccount* account) : saved_(t_cpu_tag) { t_cpu_tag = account; }
  ~TagScope() { t_cpu_tag = saved_; }
  TagScope(const TagScope&) = delete;
  TagScope& operator=(const TagScope&) = delete;
  CpuAccount* saved() const { return saved_; }

 private:
  CpuAccount* const saved_;
};

// Tags the thread with one of `device`'s phases for a scope (lib/cpu_account.h CpuPhase). Any
// type with cpu_phase_account(CpuPhase) (a BlockDevice) will do.
class PhaseScope : public TagScope {
 public:
  template <typename Device>
  PhaseScope(const Device& device, CpuPhase phase)
      : TagScope(&device.cpu_phase_account(phase)) {}
};

}  // namespace vstack::internal

#endif  // VSTACK_LIB_CPU_TAG_H_
