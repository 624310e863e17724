// The comparison a matrix run ends with: per stack, the median over rounds of every metric (with
// min and max where it matters), ratios against the baseline taken within each round and then
// the median, the whitepaper's efficiency overhead, per-layer attribution over all rounds, the
// gap in words, and the anchors' numbers and ratios. Text, JSON and charts all print this.
#ifndef VSTACK_BENCH_WORKLOAD_SUMMARY_H_
#define VSTACK_BENCH_WORKLOAD_SUMMARY_H_

#include <string>
#include <vector>

#include "bench/workload/attribution.h"
#include "bench/workload/matrix.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

struct Spread {
  double median = 0, min = 0, max = 0;
  int n = 0;
};
Spread SpreadOf(std::vector<double> values);

struct AnchorSummary {
  std::string tool;
  int runs = 0;                  // successful runs
  Spread iops;
  double mbps = 0;               // medians
  double p50_us = -1, p99_us = -1;
  double cpu_us_per_io = -1;
  Spread ratio;                  // vstack IOPS / tool IOPS, per round, then the median
  std::string command;           // the last command run
  std::string note;
  std::vector<std::string> errors;
};

struct StackSummary {
  std::string name;
  std::string spec;
  std::vector<std::string> chain;
  std::string note;
  std::string skipped;
  std::string error;
  bool interrupted = false;
  int runs = 0;                  // rounds with a measurement
  bool baseline = false;
  Spread iops, mbps;
  double read_iops = 0, write_iops = 0;  // medians, like everything below
  double mean_us = 0, p50_us = 0, p99_us = 0, p999_us = 0;
  double read_mean_us = 0, write_mean_us = 0;
  double cpu_us_per_io = 0;
  double process_cpu_pct = 0, machine_cpu_pct = 0, others_cpu_pct = 0;
  double iops_per_cpu_s = 0, iops_per_cpu_pct = 0;
  double cpu_ready_pct = 0;      // as configured for this stack
  double yields = 0, yield_wait_ms = 0, yield_max_wait_ms = 0, signal_wait_ms = 0;
  double ready_stalled_pct = 0;  // CPU Ready injected (medians over rounds)
  Spread iops_vs_base;           // per-round IOPS ratio to the baseline
  double overhead_vs_base = 0;   // (base_eff - eff) / base_eff, from the median efficiencies
  int median_round = -1;         // the round whose IOPS is the median (for detailed tables)
  LatencyHistogram latency;      // every round's reads and writes merged (for the CDF)
  Attribution attribution;       // over every round
  std::string gap;               // the gap to the baseline in words
  std::vector<AnchorSummary> anchors;
};

struct MatrixSummary {
  std::string baseline;  // name of the baseline stack ("" if none ran)
  std::vector<StackSummary> stacks;
};

// The baseline is the first stack that produced a measurement.
MatrixSummary Summarize(const MatrixResult& m);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_SUMMARY_H_
