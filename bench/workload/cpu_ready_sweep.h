// The figures of a --cpu-ready run, computed once for the text, the JSON and the chart: the
// stacks that ran with the quantum scheduler, each one's median measured window, the sweep's
// growth against its first row beside the published CPU Ready table's (presets.h), and the
// warning when the host's own CPU Ready outweighs the stalls injected.
#ifndef VSTACK_BENCH_WORKLOAD_CPU_READY_SWEEP_H_
#define VSTACK_BENCH_WORKLOAD_CPU_READY_SWEEP_H_

#include <string>
#include <vector>

#include "bench/workload/matrix.h"
#include "bench/workload/summary.h"

namespace vstack::bench {

// The rows of the CPU Ready table: the summaries of the stacks that ran (runs > 0), in run
// order, when the knobs turned the quantum scheduler on; none otherwise. They point into `s`.
std::vector<const StackSummary*> SchedulerRows(const MatrixResult& m, const MatrixSummary& s);

// The median over the rounds of `stack`'s measured window, in seconds, counting the rounds that
// did I/O; 0 when there is no such stack or round.
double MedianWindowSeconds(const MatrixResult& m, const std::string& stack);

// A sweep's growth against its first row (the control), row by row, next to the published
// table's row of the same position. Ratios to a control of zero are NaN.
struct CpuReadyGrowth {
  double ready_pct = 0;
  double yields_x = 0, wait_x = 0, duration_x = 0;
  bool has_published = false;  // the published table has a row at this position
  double published_ready_pct = 0;
  double published_yields_x = 0, published_wait_x = 0, published_duration_x = 0;
};
// One per SchedulerRows() row; empty without a sweep (fewer than two rows).
std::vector<CpuReadyGrowth> CpuReadyGrowthRows(const MatrixResult& m, const MatrixSummary& s);

// A sweep's warning when the host's own CPU Ready (the largest of the stacks') exceeds the
// smallest injected RDY%: then the host, not the injected stalls, sets the ratios. "" if not.
std::string CpuReadyWarning(const MatrixResult& m, const MatrixSummary& s);

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_CPU_READY_SWEEP_H_
