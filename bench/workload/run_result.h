// The results of one workload run: what every report (text, JSON, charts) is made from, and
// the derived numbers (IOPS, percentiles, CPU per I/O, efficiency) computed in one place so
// every report says the same thing.
#ifndef VSTACK_BENCH_WORKLOAD_RUN_RESULT_H_
#define VSTACK_BENCH_WORKLOAD_RUN_RESULT_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/workload/cpu_usage.h"
#include "bench/workload/host_ready.h"
#include "bench/workload/knobs.h"
#include "bench/workload/yield_stats.h"
#include "lib/cpu_account.h"
#include "lib/export.h"
#include "lib/histogram.h"
#include "lib/io_request.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

// Completed requests of one kind, with their latency (submit to callback, as the workload saw
// it). Only requests that completed inside the measured window are counted.
struct OpTotals {
  uint64_t ios = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
  LatencyHistogram latency;

  void Merge(const OpTotals& o);
};

struct ThreadResult {
  uint32_t index = 0;
  OpTotals read, write, flush;
  OpTotals Total() const;  // reads + writes (flushes are reported on their own)
};

// A latency histogram of one window: the bucket counts of a LatencyHistogram (same buckets)
// taken as the difference of two snapshots. Empty when nothing was recorded.
struct WindowHistogram {
  std::vector<uint64_t> counts;  // LatencyHistogram::kBuckets entries, or none
  uint64_t total = 0;

  // The counts of `after` minus those of `before` (snapshots of the same histogram).
  static WindowHistogram Between(const LatencyHistogram& before, const LatencyHistogram& after);
  void Merge(const WindowHistogram& o);
  // Midpoint of the bucket holding percentile p (0..100), in ns; 0 when empty.
  double Percentile(double p) const;
};

// What one layer of the stack did during the measured window (counter differences).
struct LayerDelta {
  std::string kind;         // "vhd", "uring"...
  std::string description;  // BlockDevice::Describe()
  std::array<uint64_t, kOpCount> ops{};
  std::array<uint64_t, kOpCount> bytes{};
  std::array<uint64_t, kOpCount> errors{};
  std::array<uint64_t, kOpCount> latency_sum_ns{};  // summed submit->completion time
  std::array<WindowHistogram, kOpCount> latency{};  // submit->completion, this window only
  std::vector<std::string> counter_names;           // the layer's own counters
  std::vector<uint64_t> counters;
  // CPU the sampler charged to the layer (its code on every thread, and its helper threads),
  // and the samples that charged it (lib/cpu_account.h); 0 when the run did not sample. The
  // part of cpu_ns each phase of the layer was charged, by CpuPhase index (LayerStats).
  uint64_t cpu_ns = 0;
  uint64_t cpu_samples = 0;
  std::array<uint64_t, kCpuPhaseCount> cpu_phase_ns{};
  // The request paths that ended at this layer in this window (lib/stats.h PathStats; empty
  // unless the stack ran with StatsMode::kLatency): at the top layer the guest's requests,
  // below it the I/O the layer above issued for itself. Index = level (0: the backend).
  struct Paths {
    uint64_t requests = 0;
    uint64_t total_ns = 0;
    uint64_t negative = 0;
    std::array<uint64_t, kMaxStackDepth> self_ns{};
    std::array<WindowHistogram, kMaxStackDepth> self{};
  } paths;
  int level = 0;  // devices below this one

  uint64_t total_ops() const;
  void Merge(const LayerDelta& o);  // adds another window of the same layer
};

struct RunResult {
  std::string stack;   // the name shown in reports ("raw", "vhd-dynamic", or the spec)
  std::string spec;    // the spec opened
  int round = 0;       // 0-based round of a matrix
  WorkloadKnobs knobs;
  uint64_t region_bytes = 0;
  double seconds = 0;  // the measured window
  std::vector<ThreadResult> threads;
  CpuUsage cpu;
  HostReady host_ready;            // the threads' run-queue wait on this machine (host_ready.h)
  std::vector<LayerDelta> layers;  // top first
  YieldStats yields;               // the quantum scheduler's, when knobs.quantum_ns != 0
  bool interrupted = false;        // stopped early by the user
  std::string error;               // first I/O error, "" if none

  OpTotals Read() const;
  OpTotals Write() const;
  OpTotals Flush() const;
  OpTotals Total() const;
};

// The numbers reports print, derived from a RunResult.
struct RunMetrics {
  uint64_t ios = 0;         // reads + writes
  double iops = 0, read_iops = 0, write_iops = 0;
  double mib_s = 0;         // MiB (2^20 bytes) per second, as the per-thread tables
  double mean_us = 0, p50_us = 0, p99_us = 0, p999_us = 0;
  double read_mean_us = 0, write_mean_us = 0;
  double cpu_us_per_io = 0;     // the benchmark threads' CPU per I/O (CpuUsage::own_s)
  double process_cpu_pct = 0;   // process CPU as % of the whole machine's capacity
  double machine_cpu_pct = 0;   // all busy CPU as % of capacity (ours and others')
  double others_cpu_pct = 0;    // busy CPU that was not ours
  double steal_pct = 0;         // steal, % of the machine's capacity
  double load_average = -1;     // 1-minute load average at the window's end; < 0 unknown
  double iops_per_cpu_s = 0;    // efficiency: I/Os per CPU-second of the benchmark threads
  double iops_per_cpu_pct = 0;  // the whitepaper's IOPS per %CPU (process % of the machine)
  // The quantum scheduler (0 without one): SOS_SCHEDULER_YIELD's columns, and the CPU Ready
  // injected, as % of the window's scheduler time.
  double yields = 0, yield_wait_ms = 0, yield_max_wait_ms = 0, signal_wait_ms = 0;
  double ready_max_stall_ms = 0;  // the longest CPU Ready stall injected
  double ready_stalled_pct = 0;
  // The host's own CPU Ready: the benchmark threads' run-queue wait, % of their wall time;
  // < 0 when not available (no schedstat).
  double host_ready_pct = -1;
};
RunMetrics Metrics(const RunResult& r);

// The whitepaper's overhead: (base_eff - eff) / base_eff, as a fraction. 0 if base_eff is 0.
double EfficiencyOverhead(double base_iops_per_cpu_s, double iops_per_cpu_s);

// Nanoseconds to microseconds.
inline double Us(double ns) { return ns / 1000.0; }

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_RUN_RESULT_H_
