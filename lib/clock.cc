#include "lib/clock.h"

#include <sys/prctl.h>

#include <cerrno>

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
    const uint64_t end = ThreadCpuNs() + ns;
    // Real work the compiler cannot drop: a xorshift chain, checked against the CPU clock
    // every 64 steps.
    uint64_t x = 88172645463325252ull;
    while (ThreadCpuNs() < end) {
      for (int i = 0; i < 64; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
      }
    }
    sink_.store(x, std::memory_order_relaxed);
  }

 private:
  static uint64_t ThreadCpuNs() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  }
  std::atomic<uint64_t> sink_{0};
};

}  // namespace

Clock& SystemClock() {
  static MonotonicClock clock;
  return clock;
}

}  // namespace vstack
