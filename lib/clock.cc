#include "lib/clock.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace vstack {
namespace {

class MonotonicClock final : public Clock {
 public:
  uint64_t Now() override { return NowNs(); }

  void SleepUntil(uint64_t deadline_ns) override {
    thread_local bool slack_set = false;
    if (!slack_set) {
      prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // best effort; wake-ups otherwise run 50 µs late
      slack_set = true;
    }
    timespec ts;
    ts.tv_sec = static_cast<time_t>(deadline_ns / 1000000000ull);
    ts.tv_nsec = static_cast<long>(deadline_ns % 1000000000ull);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }

  void Spin(uint64_t ns) override {
    // A read of the thread's CPU clock is a system call (0.1-1 us, more in a VM). About half of
    // the first read and half of the last fall outside the interval they measure, and the last
    // read lands on average half a check interval past the target: the spin stops that much
    // early, so that it burns `ns` in all on average, not `ns` plus a read or two.
    static const uint64_t early_ns = CalibrateEarlyStop();
    const uint64_t start = ThreadCpuNs();
    const uint64_t end = start + (ns > early_ns ? ns - early_ns : 0);
    uint64_t x = 88172645463325252ull;
    while (ThreadCpuNs() < end) x = Work(x);
    sink_.store(x, std::memory_order_relaxed);
  }

 private:
  // Real work the compiler cannot drop: 64 steps of a xorshift chain, between two clock checks.
  static uint64_t Work(uint64_t x) {
    for (int i = 0; i < 64; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
    }
    return x;
  }
  // One clock read plus half a check interval (a read and a Work), as means of a few samples.
  uint64_t CalibrateEarlyStop() {
    constexpr int kSamples = 64;
    uint64_t t0 = ThreadCpuNs();
    for (int i = 0; i < kSamples; ++i) (void)ThreadCpuNs();
    const uint64_t read_ns = (ThreadCpuNs() - t0) / (kSamples + 1);
    uint64_t x = 1;
    t0 = ThreadCpuNs();
    for (int i = 0; i < kSamples; ++i) {
      x = Work(x);
      (void)ThreadCpuNs();
    }
    const uint64_t interval_ns = (ThreadCpuNs() - t0) / kSamples;
    sink_.store(x, std::memory_order_relaxed);
    return read_ns + interval_ns / 2;
  }
  std::atomic<uint64_t> sink_{0};
};

}  // namespace

Clock& SystemClock() {
  static MonotonicClock clock;
  return clock;
}

}  // namespace vstack
