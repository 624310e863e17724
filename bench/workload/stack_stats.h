// Snapshots of every layer's statistics (BlockDevice::Stats) in a stack, and their differences
// over a measured window: the raw material of per-layer attribution.
#ifndef VSTACK_BENCH_WORKLOAD_STACK_STATS_H_
#define VSTACK_BENCH_WORKLOAD_STACK_STATS_H_

#include <utility>
#include <vector>

#include "bench/workload/run_result.h"
#include "lib/block_device.h"
#include "lib/export.h"
#include "lib/stats.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

// The devices of a stack, top first.
std::vector<BlockDevice*> StackLayers(BlockDevice& top);

// Sets the statistics mode of every layer (lib/stats.h): attribution needs kLatency on the
// whole stack, set before the measured queues are opened.
void SetStackStatsMode(BlockDevice& top, StatsMode mode);

// Sets a mode on every layer for its lifetime and puts the previous modes back afterwards.
class ScopedStackStatsMode {
 public:
  ScopedStackStatsMode(BlockDevice& top, StatsMode mode);
  ~ScopedStackStatsMode();
  ScopedStackStatsMode(const ScopedStackStatsMode&) = delete;
  ScopedStackStatsMode& operator=(const ScopedStackStatsMode&) = delete;

 private:
  std::vector<std::pair<BlockDevice*, StatsMode>> saved_;
};

// Stats() of every layer, top first. Thread-safe while the stack runs.
std::vector<LayerStats> SnapshotStack(BlockDevice& top);

// What each layer did between two snapshots of the same stack.
std::vector<LayerDelta> StackDelta(BlockDevice& top, const std::vector<LayerStats>& before,
                                   const std::vector<LayerStats>& after);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_STACK_STATS_H_
