// What the quantum scheduler of the workload (bench/workload/quantum_scheduler.h) counts: its
// yields as sys.dm_os_wait_stats shows SOS_SCHEDULER_YIELD, and the CPU-Ready stalls injected.
// A plain value, part of a run's result (run_result.h).
#ifndef VSTACK_BENCH_WORKLOAD_YIELD_STATS_H_
#define VSTACK_BENCH_WORKLOAD_YIELD_STATS_H_

#include <cstdint>

namespace vstack::bench {

struct YieldStats {
  uint64_t yields = 0;          // waiting_tasks_count
  uint64_t wait_ns = 0;         // wait_time
  uint64_t max_wait_ns = 0;     // max_wait_time (of the window it was reset for)
  uint64_t signal_wait_ns = 0;  // signal_wait_time
  uint64_t stalls = 0;          // CPU-Ready stalls injected on the schedulers
  uint64_t stalled_ns = 0;      // their total length
  uint64_t max_stall_ns = 0;    // the longest (of the window, as max_wait_ns)

  // Counts of `after` minus `before`; the maxima are `after`'s (reset at the window's start).
  static YieldStats Between(const YieldStats& before, const YieldStats& after);
  void Merge(const YieldStats& o);  // sums; max of the maxima
};

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_YIELD_STATS_H_
