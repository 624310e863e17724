// Per-layer attribution: what each layer of a stack did per guest I/O during the measured
// windows, from the layers' own statistics (lib/stats.h) - requests in and out, bytes
// amplification, the layer's named counters (allocations, metadata writes, dedup hits ...),
// and the time spent in the layer - and the same in words.
//
// Time in a layer is its self time (lib/stats.h): from the moment a request enters the layer
// until the layer hands it on or completes it, excluding the time of the lower request whose
// completion completed it. Every guest request carries its path's self time per level, so
// per guest I/O the layers' self times plus the device's time add up exactly to the guest's
// latency as the stack measured it; `residual_pct` compares that sum with the latency the
// workload measured itself. Mean, p50 and p99 come from the same per-guest samples, so they
// never disagree in sign. A layer's waits for its own I/O (a bitmap read, an allocation
// commit) are part of its self time; that I/O is also shown on its own (own_*), with the
// device's time serving it, separately from the guest's data I/O. When that I/O takes more
// time per guest I/O than the layer's self time, it ran overlapped with guest I/O, and the
// words say so. Without latency statistics (StatsMode::kCounts) there is no time: `timed` is
// false and the words say so instead of printing 0.
//
// Resolution. The clock is read once per batch and the timestamp is shared through the stack
// (lib/stats.h), so a layer that hands a request on within its batch measures a self time of
// exactly 0, however much CPU it spent: that CPU counts in the level below, and in the stack's
// CPU per I/O. A self time below kSelfTimeResolutionUs per guest I/O is therefore reported as
// "below the timestamp resolution" (`self_resolved` false), never as a bare 0.
//
// CPU. Each layer's CPU per guest I/O is what the sampler charged to it (lib/cpu_account.h): its
// code on every thread (the checks and DoSubmit of its queue, its completion callbacks, its
// DoPoll, the system calls made from them) and its own helper threads. What ran outside every
// layer is `outside_cpu_us_per_io`: the workload threads' own code (the engine) and the io_uring
// kernel workers. Layers plus outside should equal the benchmark's CPU as the process measured
// it (CpuUsage::threads_s); the difference is CPU on threads the sampler does not cover (a
// layer's thread that is not enrolled, a library's own threads), and when it is more than
// kCpuSumTolerance of the total the words say that the sum misses, and by how much. A layer that
// models CPU instead of spending it (hv with vcpus: the request's CPU is held on a modelled vCPU
// while the thread sleeps) counts it in its counter kHeldCpuCounter; that is the guest's CPU, not
// the host's, so it is reported beside the layer's CPU (held_cpu_us_per_io) and is in no sum.
//
// CPU by phase. A layer that tags its phases (lib/cpu_account.h CpuPhase: hash, index, metadata,
// submit ...) has its CPU split among them in `cpu_phases`: each phase that was charged, in the
// fixed order of CpuPhase, then "other", the layer's CPU outside every phase. The shares add up to
// the layer's cpu_us_per_io exactly (they divide the same samples). A layer that tags no phase,
// or was charged nothing in any, has no split.
#ifndef VSTACK_BENCH_WORKLOAD_ATTRIBUTION_H_
#define VSTACK_BENCH_WORKLOAD_ATTRIBUTION_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/workload/paired_stats.h"
#include "bench/workload/run_result.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

// Self times per guest I/O below this (they would print as 0.00 us) are below the resolution
// of one timestamp per batch.
inline constexpr double kSelfTimeResolutionUs = 0.005;
// Layers + outside must come within this share of the measured CPU to "add up".
inline constexpr double kCpuSumTolerance = 0.10;
// The counter (in ns) of a layer's CPU held on modelled vCPUs, not spent on the host (hv).
inline constexpr const char* kHeldCpuCounter = "held_cpu_ns";
// The counter (in us) of the time a layer's commits waited for flushes and FUA writes below.
inline constexpr const char* kDurableWaitCounter = "durable_wait_us";

struct CounterRate {
  std::string name;
  uint64_t total = 0;
  double per_io = 0;  // per guest I/O
};

struct CpuPhaseShare {
  std::string name;      // CpuPhaseName, or "other"
  double us_per_io = 0;  // CPU charged to the phase per guest I/O
};
// The name of a layer's CPU outside every phase.
inline constexpr const char* kOtherCpuPhase = "other";

struct LayerCost {
  std::string kind;
  std::string description;
  bool backend = false;                   // the bottom device
  std::array<double, kOpCount> in_per_io{};   // requests completed here, per guest I/O
  std::array<double, kOpCount> out_per_io{};  // requests completed by the layer below
  double in_total = 0;                    // sums over ops
  double out_total = 0;
  double read_bytes_ratio = 0;            // read bytes below / read bytes here (0: none here)
  double write_bytes_ratio = 0;           // write bytes below / write bytes here
  int level = 0;                          // devices below (0: the backend)
  double self_us_per_io = 0;              // self time per guest I/O (backend: the device), mean
  double self_median_us_per_io = 0;       // the same, median (p50) over guest I/Os
  double self_p99_us_per_io = 0;          // the same, 99th percentile
  bool self_resolved = false;             // timed, and the mean >= kSelfTimeResolutionUs
  bool self_median_resolved = false;      // timed, and the p50 >= kSelfTimeResolutionUs
  double mean_latency_us = 0;             // mean submit->completion at this layer
  // The I/O this layer issued for itself (metadata, allocation commits, write-back): requests
  // whose path ended at the layer below; their latency there and the device's part of it.
  double own_requests_per_io = 0;
  double own_us_per_io = 0;
  double own_device_us_per_io = 0;
  bool own_overlaps = false;              // own_us_per_io > self_us_per_io: not all waited for
  double cpu_us_per_io = 0;               // CPU charged to the layer per guest I/O (sampled)
  uint64_t cpu_samples = 0;               // the samples behind it
  std::vector<CpuPhaseShare> cpu_phases;  // its split by phase (see above); empty: none
  double held_cpu_us_per_io = 0;          // modelled CPU held, not spent (kHeldCpuCounter)
  std::vector<CounterRate> counters;      // every counter the layer declares, in its order
  std::string words;                      // all of the above in one sentence
};

struct Attribution {
  uint64_t guest_ios = 0;      // requests completed by the top layer (all ops)
  double seconds = 0;          // the measured windows, summed (0: not given)
  bool timed = false;          // self times were measured (the stack kept latency)
  double layers_us_per_io = 0; // self time of all layers above the backend, per guest I/O (mean)
  double layers_median_us_per_io = 0;  // the sum of those layers' medians
  double device_us_per_io = 0;         // the backend's time on the guest's path, mean
  double end_to_end_us = 0;    // the guest's mean latency at the top layer
  double sum_us = 0;           // layers + device (equals end_to_end_us up to rounding)
  double measured_us = 0;      // the workload's own mean latency (0: not given)
  double residual_pct = 0;     // (sum_us - measured_us) / measured_us * 100 (0: not given)
  uint64_t joined = 0;  // guest requests that joined lower work begun before them (PathStats)
  std::vector<LayerCost> layers;  // top first
  // CPU per guest I/O (all 0 when `cpu_sampled` is false; `cpu_words` then says why).
  bool cpu_sampled = false;
  double cpu_total_us_per_io = 0;        // the benchmark's CPU, measured (CpuUsage::threads_s)
  double outside_cpu_us_per_io = 0;      // the engine + the io_uring workers
  double outside_engine_us_per_io = 0;   // the workload threads outside every layer (sampled)
  double outside_uring_us_per_io = 0;    // the io_uring kernel workers (their /proc stat)
  double cpu_sum_us_per_io = 0;          // every layer's + outside
  double cpu_residual_pct = 0;           // (sum - total) / total * 100
  bool cpu_adds_up = false;              // |residual| <= kCpuSumTolerance
  std::string cpu_words;                 // the CPU split and its check in one sentence
};

// REQUIRES: `layers` is top first (as RunResult::layers), summed over any number of windows.
// `measured_us`: the mean latency the workload measured for the same requests, or 0. `cpu`: the
// CPU of the same windows, summed (CpuUsage::Merge), for the per-layer CPU; null: none.
Attribution Attribute(const std::vector<LayerDelta>& layers, double measured_us = 0,
                      const CpuUsage* cpu = nullptr);

// One sentence for a summary: the layers' self time, the largest, and the residual against
// the measured latency. Layers whose self time is below the timestamp resolution are named as
// such, and when no layer above the device resolves, the sentence points at `cpu`, the stack's
// CPU per I/O against `base` (the baseline's name), where their cost shows. Empty when the
// stack has no layer above the device or was not timed.
std::string AttributionSentence(const Attribution& a, const RatioInterval& cpu,
                                const std::string& base);

// The workload's own mean latency (reads, writes and flushes) over `runs`, in us.
double MeasuredMeanUs(const std::vector<const RunResult*>& runs);

// Sums the layer deltas of several runs of the same stack.
std::vector<LayerDelta> MergeLayerDeltas(const std::vector<const RunResult*>& runs);
// Sums their CPU.
CpuUsage MergeCpu(const std::vector<const RunResult*>& runs);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_ATTRIBUTION_H_
