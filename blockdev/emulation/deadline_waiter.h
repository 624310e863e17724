// DeadlineWaiter: delivers completions at their deadlines on a Clock, with the *mean* delivery
// time on the deadline although the host wakes a sleeping thread late. The engine of TimedQueue
// (delay:, hv:).
//
// Two mechanisms, both measured on the queue's own thread:
// - Wake-up latency: WaitUntil(due) sleeps until `due` minus the measured mean overshoot of its
//   past sleeps (capped at kMaxSpinNs), then spins the rest on the clock. A deadline nearer than
//   that is spun to directly. So the thread sleeps for all but at most kMaxSpinNs per wait: no
//   core busy-waits per request, and an idle host's wake-up jitter (tens of µs) is absorbed.
// - Mean lateness: what the spin cannot absorb (a loaded host wakes threads ms late) is fed back
//   by Delivered(), once per wake-up: DueTime() moves later deliveries earlier by the measured mean
//   lateness (an integral controller), never before the request started. Individual deliveries then
//   scatter around their deadlines, and their mean converges on them; the layer's late_ns and
//   early_ns counters show by how much each way. Each class of requests (reads, the rest) has
//   its own correction: a loaded host's lateness grows with the sleep, so a 5 ms read and a
//   0.25 ms write are late by different amounts, and one correction would move one mean for
//   the other's lateness.
// On a ManualClock (no overshoot) both corrections stay 0 and every delivery is exact.
// Not thread-safe: one owner thread.
#ifndef VSTACK_BLOCKDEV_EMULATION_DEADLINE_WAITER_H_
#define VSTACK_BLOCKDEV_EMULATION_DEADLINE_WAITER_H_

#include <cstddef>
#include <cstdint>

#include "lib/clock.h"

namespace vstack {

class DeadlineWaiter {
 public:
  static constexpr uint64_t kMaxSpinNs = 100'000;
  static constexpr size_t kClasses = 2;  // reads, everything else

  explicit DeadlineWaiter(Clock& clock) : clock_(clock) {}

  // When to deliver a request due at `deadline` that started at `start` (<= deadline): the
  // deadline moved earlier by the lateness being compensated for its class, not before `start`.
  uint64_t DueTime(uint64_t start, uint64_t deadline, size_t cls) const;
  // Blocks the calling thread until Now() >= due: sleeps, then spins at most kMaxSpinNs.
  void WaitUntil(uint64_t due);
  // `n` completions of class `cls` were delivered at one wake-up, `error_ns` later than their
  // deadlines in sum
  // (negative: earlier). Feeds the lateness back: the correction moves by kLeadGain per
  // completion, at most half the batch's mean error at once (many deadlines met by one
  // wake-up would otherwise over-correct).
  void Delivered(double error_ns, uint64_t n, size_t cls);

  double compensation_ns(size_t cls) const { return lead_ns_[cls]; }
  double wake_latency_ns() const { return wake_ns_; }

 private:
  Clock& clock_;
  double lead_ns_[kClasses] = {};  // mean lateness compensated per class, >= 0
  double wake_ns_ = 0;             // mean overshoot of a sleep
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_EMULATION_DEADLINE_WAITER_H_
