// Per-layer attribution: what each layer of a stack did per guest I/O during the measured
// windows, from the layers' own statistics (lib/stats.h) - requests in and out, bytes
// amplification, the layer's named counters (allocations, metadata writes, dedup hits ...),
// and the time spent in the layer - and the same in words.
//
// Time in a layer is the latency it adds: its submit-to-completion time minus that of the layer
// below - the layer's own processing (both directions), its validation by the base class, and
// the time its requests wait while the rest of their batch is processed (at queue depth N a
// synchronous layer that costs c per request adds about N x c to each request). For the backend
// it is the device time. At QD1 it is the layer's per-request cost; the CPU a layer costs shows
// in the stack's CPU per I/O against the baseline. Two forms:
//  - mean: the latency sums' difference divided by the guest I/Os. It includes rare costs (an
//    allocation every 256 writes) but also every preemption that lands inside the layer, which
//    dominates when threads outnumber free CPUs.
//  - median: per op, the median latency here minus the median below, weighted by requests per
//    guest I/O. Robust to preemption; blind to costs paid by fewer than half the requests.
// When a layer runs several lower requests at once (or the layer below does work no caller
// waits for), the differences under-count; they are never reported below zero.
#ifndef VSTACK_BENCH_WORKLOAD_ATTRIBUTION_H_
#define VSTACK_BENCH_WORKLOAD_ATTRIBUTION_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/workload/run_result.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

struct CounterRate {
  std::string name;
  uint64_t total = 0;
  double per_io = 0;  // per guest I/O
};

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
  double self_us_per_io = 0;              // time in this layer (backend: the device), mean
  double self_median_us_per_io = 0;       // the same from median latencies
  double mean_latency_us = 0;             // mean submit->completion at this layer
  std::vector<CounterRate> counters;      // the layer's own counters that moved
  std::string words;                      // all of the above in one sentence
};

struct Attribution {
  uint64_t guest_ios = 0;      // requests completed by the top layer (all ops)
  double layers_us_per_io = 0; // time in all layers above the backend, per guest I/O (mean)
  double layers_median_us_per_io = 0;  // the same from median latencies
  std::vector<LayerCost> layers;  // top first
};

// REQUIRES: `layers` is top first (as RunResult::layers), summed over any number of windows.
Attribution Attribute(const std::vector<LayerDelta>& layers);

// Sums the layer deltas of several runs of the same stack.
std::vector<LayerDelta> MergeLayerDeltas(const std::vector<const RunResult*>& runs);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_ATTRIBUTION_H_
