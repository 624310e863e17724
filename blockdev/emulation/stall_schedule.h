// StallSchedule: when a virtual CPU that wants to run is kept off the physical CPU (CPU Ready),
// and for how long. Stall lengths are drawn from a distribution and rounded up to whole
// hypervisor quanta; each next stall is placed so that, at its end, the stalled time is exactly
// `fraction` of the wall time since the schedule started. A stall that comes late (the thread
// was busy elsewhere) moves the next one earlier, so the fraction holds over any long window.
// Used by the ready: layer (per queue thread) and by the workload's quantum scheduler (per
// scheduler). Not thread-safe: one owner.
#ifndef VSTACK_BLOCKDEV_EMULATION_STALL_SCHEDULE_H_
#define VSTACK_BLOCKDEV_EMULATION_STALL_SCHEDULE_H_

#include <cstdint>

#include "blockdev/emulation/service_time.h"

namespace vstack {

class StallSchedule {
 public:
  // fraction in [0, 1): 0 never stalls. quantum_ns 0: stall lengths are not rounded.
  StallSchedule(double fraction, ServiceTime stall, uint64_t quantum_ns, uint64_t seed,
                uint64_t start_ns);

  // The length of the stall due at `now` (booked as injected), or 0 if none is due. The caller
  // then stalls for that long.
  uint64_t Due(uint64_t now);

  uint64_t stalled_ns() const { return stalled_ns_; }
  uint64_t stalls() const { return stalls_; }
  uint64_t max_stall_ns() const { return max_stall_ns_; }
  double fraction() const { return fraction_; }

 private:
  uint64_t DrawLength();
  void PlanNext(uint64_t earliest);

  double fraction_;
  ServiceTime stall_;
  uint64_t quantum_ns_;
  TimingRng rng_;
  uint64_t start_ns_;
  uint64_t next_start_ = 0, next_len_ = 0;
  uint64_t stalled_ns_ = 0, stalls_ = 0, max_stall_ns_ = 0;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_EMULATION_STALL_SCHEDULE_H_
