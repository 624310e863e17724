#include "blockdev/emulation/stall_schedule.h"

#include <algorithm>
#include <cmath>

namespace vstack {

StallSchedule::StallSchedule(double fraction, ServiceTime stall, uint64_t quantum_ns, uint64_t seed,
                             uint64_t start_ns)
    : fraction_(fraction), stall_(stall), quantum_ns_(quantum_ns), rng_(seed), start_ns_(start_ns) {
  if (fraction_ > 0) PlanNext(start_ns_);
}

uint64_t StallSchedule::DrawLength() {
  uint64_t len = std::max<uint64_t>(1, stall_.Draw(rng_));
  if (quantum_ns_ != 0) len = (len + quantum_ns_ - 1) / quantum_ns_ * quantum_ns_;
  return len;
}

// Places the next stall so that it ends when stalled time = fraction x elapsed time, and not
// before `earliest`.
void StallSchedule::PlanNext(uint64_t earliest) {
  next_len_ = DrawLength();
  const double end = double(start_ns_) + double(stalled_ns_ + next_len_) / fraction_;
  const double start = end - double(next_len_);
  next_start_ = std::max<uint64_t>(earliest, static_cast<uint64_t>(std::llround(start)));
}

uint64_t StallSchedule::Due(uint64_t now) {
  if (fraction_ <= 0 || now < next_start_) return 0;
  const uint64_t len = next_len_;
  stalled_ns_ += len;
  ++stalls_;
  max_stall_ns_ = std::max(max_stall_ns_, len);
  PlanNext(now + len);
  return len;
}

}  // namespace vstack
