// Ctrl-C and SIGTERM for a command that stops cleanly: while an InterruptScope lives, the first
// SIGINT or SIGTERM sets stop() (the command finishes what it must: a report, removing what it
// created) instead of killing the process. The same signal repeated within a quarter of a
// second is that interrupt again (GNU timeout signals the process and then its group); a later
// one, a second Ctrl-C, kills at once. One scope at a time; the old handlers come back at its
// end unless a signal came (the command is then finishing, and a repeat must not kill it).
#ifndef VSTACK_TOOLS_INTERRUPT_H_
#define VSTACK_TOOLS_INTERRUPT_H_

#include <signal.h>

#include <atomic>

namespace vstack::cli {

class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  // Set by the first signal; read it from any thread.
  static std::atomic<bool>& stop();

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_INTERRUPT_H_
