// The one clock used for request latency: CLOCK_MONOTONIC in nanoseconds (vDSO, ~30 ns here).
//
// Layers that model time (delay:, hv:, ready:) and the workload's quantum scheduler read and
// spend time through the Clock interface instead, so that unit tests can drive them on a
// ManualClock: semantics are checked on synthetic time, never against wall-clock thresholds.
#ifndef VSTACK_LIB_CLOCK_H_
#define VSTACK_LIB_CLOCK_H_

#include <time.h>

#include <atomic>
#include <cstdint>

namespace vstack {

inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) in nanoseconds: what Clock::Spin
// burns, and what tests and benchmarks measure a thread's own work with.
inline uint64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Time as a layer sees it. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic nanoseconds.
  virtual uint64_t Now() = 0;
  // Blocks the calling thread, without using a CPU, until Now() >= deadline_ns.
  virtual void SleepUntil(uint64_t deadline_ns) = 0;
  // Uses `ns` nanoseconds of the calling thread's CPU time (real work, so that CPU accounting
  // sees it). A synthetic clock advances instead.
  virtual void Spin(uint64_t ns) = 0;
};

// CLOCK_MONOTONIC; SleepUntil sleeps with clock_nanosleep (timer slack set to 1 ns for the
// calling thread on first use, so wake-ups are not rounded up by the default 50 µs); Spin
// burns thread CPU time (CLOCK_THREAD_CPUTIME_ID).
Clock& SystemClock();

// A synthetic clock for tests: time moves only when told to, or when a caller sleeps or spins
// (it jumps to the deadline). Counts the calls so tests can check that nothing busy-waits.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(uint64_t start_ns = 1'000'000'000) : now_(start_ns) {}
  uint64_t Now() override { return now_.load(); }
  void SleepUntil(uint64_t deadline_ns) override {
    sleeps_.fetch_add(1);
    uint64_t cur = now_.load();
    while (cur < deadline_ns && !now_.compare_exchange_weak(cur, deadline_ns)) {
    }
  }
  void Spin(uint64_t ns) override {
    spun_ns_.fetch_add(ns);
    now_.fetch_add(ns);
  }
  void Advance(uint64_t ns) { now_.fetch_add(ns); }
  uint64_t sleeps() const { return sleeps_.load(); }
  uint64_t spun_ns() const { return spun_ns_.load(); }

 private:
  std::atomic<uint64_t> now_;
  std::atomic<uint64_t> sleeps_{0};
  std::atomic<uint64_t> spun_ns_{0};
};

}  // namespace vstack

#endif  // VSTACK_LIB_CLOCK_H_
