// The comparison a matrix run ends with: per stack, the median over rounds of every metric (with
// min and max where it matters; an even count takes the mean of the two middle rounds), ratios
// against the baseline from paired per-round ratios with a 95% confidence interval
// (paired_stats.h), the whitepaper's efficiency overhead, per-layer attribution over all rounds,
// the gap in words (only significant differences are stated as findings), the machine's noise
// per round, and the anchors' numbers and ratios. Text, JSON and charts all print this.
#ifndef VSTACK_BENCH_WORKLOAD_SUMMARY_H_
#define VSTACK_BENCH_WORKLOAD_SUMMARY_H_

#include <string>
#include <vector>

#include "bench/workload/attribution.h"
#include "bench/workload/matrix.h"
#include "bench/workload/paired_stats.h"
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
  double mib_s = 0;              // medians
  double p50_us = -1, p99_us = -1;
  double cpu_us_per_io = -1;
  Spread ratio;                  // vstack IOPS / tool IOPS, per round
  RatioInterval ratio_interval;  // the same, paired per round, with its 95% interval
  double vstack_ios = 0, tool_ios = 0;  // I/Os each side did per round (medians)
  bool capped = false;           // some round's tool run was bounded by time (fewer I/Os)
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
  Spread iops, mib_s;
  double read_iops = 0, write_iops = 0;  // medians, like everything below
  double mean_us = 0, p50_us = 0, p99_us = 0, p999_us = 0;
  double read_mean_us = 0, write_mean_us = 0;
  double cpu_us_per_io = 0;
  double process_cpu_pct = 0, machine_cpu_pct = 0, others_cpu_pct = 0;
  double iops_per_cpu_s = 0, iops_per_cpu_pct = 0;
  double cpu_ready_pct = 0;      // as configured for this stack
  double yields = 0, yield_wait_ms = 0, yield_max_wait_ms = 0, signal_wait_ms = 0;
  double ready_max_stall_ms = 0;
  double ready_stalled_pct = 0;  // CPU Ready injected (medians over rounds)
  double host_ready_pct = -1;    // the host's own CPU Ready (median of the rounds that have it)
  Spread iops_vs_base;           // per-round IOPS ratios to the baseline (min, median, max)
  // Against the baseline, paired round by round (paired_stats.h): IOPS, CPU per I/O, efficiency
  // (I/Os per CPU-second) and p99 latency. The baseline's own are 1 with n rounds.
  RatioInterval iops_ratio, cpu_ratio, efficiency_ratio, p99_ratio;
  double overhead_vs_base = 0;   // (base_eff - eff) / base_eff = 1 - efficiency_ratio.estimate
  int median_round = -1;         // 0-based: the round closest to the median IOPS (detailed tables)
  LatencyHistogram latency;      // every round's reads and writes merged (for the CDF)
  Attribution attribution;       // over every round
  std::string gap;               // the gap to the baseline in words
  std::vector<AnchorSummary> anchors;
};

// How busy the machine was during one round: the medians over the round's stacks.
struct RoundNoise {
  int round = 0;              // 0-based
  double others_cpu_pct = 0;  // other processes' share of the machine's CPU capacity
  double steal_pct = 0;       // time the hypervisor gave to other guests, % of capacity
  double load_average = 0;    // 1-minute load average at the end of the round (the highest)
  double host_ready_pct = -1; // the host's CPU Ready of the benchmark threads; < 0: not available
};

struct MatrixSummary {
  std::string baseline;  // name of the baseline stack ("" if none ran)
  std::vector<StackSummary> stacks;
  std::vector<RoundNoise> noise;
  // The widest IOPS interval of a non-baseline stack, as a relative half-width (the precision
  // reached); +inf when some stack has fewer than 2 paired rounds. With the baseline alone, the
  // interval of its own (geometric mean) IOPS over the rounds; 0 when nothing ran.
  double precision_reached = 0;
};

// True when every measured non-baseline stack's IOPS interval is within `precision` (a
// relative half-width, 0.02 for 2%): what --rounds auto waits for.
bool PrecisionReached(const MatrixSummary& s, double precision);

// A warning when the machine was too busy for the precision asked (others' CPU or steal over
// 10% of capacity in a round, and the precision not reached), "" otherwise.
std::string NoiseWarning(const MatrixSummary& s, double precision);

// The device below in words, against the baseline's (`base`, named `base_name`): the requests
// it gets and the time it spends per guest I/O, and, when io_uring's kernel workers ran for
// either stack (0.05 us of CPU per guest I/O or more, both sampled), their CPU per guest I/O:
// the kernel hands a worker each request it cannot serve without blocking (a write that must
// allocate file space, such as into a hole a discard punched; a flush), which is where a
// device's extra time often goes. And when the stack's layers flush the device below by
// themselves (at least one flush per 100,000 guest I/Os more than the baseline's layers), how
// often, and how to price that on this device (the baseline with --flush-interval). "" when
// either has no layers.
std::string DeviceSentence(const Attribution& a, const Attribution& base,
                           const std::string& base_name);

// The baseline is the first stack that produced a measurement.
MatrixSummary Summarize(const MatrixResult& m);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_SUMMARY_H_
