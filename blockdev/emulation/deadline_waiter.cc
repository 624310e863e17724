#include "blockdev/emulation/deadline_waiter.h"

#include <algorithm>

namespace vstack {
namespace {
constexpr double kLeadGain = 1.0 / 16;  // integral gain per delivered completion
constexpr double kWakeGain = 1.0 / 8;   // moving-average weight of a sleep's overshoot
constexpr double kMaxLeadNs = 1e9;
constexpr uint64_t kSpinStepNs = 2'000;
}  // namespace

uint64_t DeadlineWaiter::DueTime(uint64_t start, uint64_t deadline, size_t cls) const {
  const uint64_t lead = static_cast<uint64_t>(lead_ns_[cls]);
  return deadline - std::min(lead, deadline - start);
}

void DeadlineWaiter::WaitUntil(uint64_t due) {
  uint64_t now = clock_.Now();
  const uint64_t early = std::min(static_cast<uint64_t>(wake_ns_), kMaxSpinNs);
  if (due > now + early) {
    const uint64_t target = due - early;
    clock_.SleepUntil(target);
    now = clock_.Now();
    wake_ns_ += kWakeGain * (double(now - std::min(now, target)) - wake_ns_);
  }
  while (now < due) {
    clock_.Spin(std::min(due - now, kSpinStepNs));
    now = clock_.Now();
  }
}

void DeadlineWaiter::Delivered(double error_ns, uint64_t n, size_t cls) {
  if (n == 0) return;
  const double gain = std::min(0.5, kLeadGain * double(n));
  lead_ns_[cls] = std::clamp(lead_ns_[cls] + gain * error_ns / double(n), 0.0, kMaxLeadNs);
}

}  // namespace vstack
