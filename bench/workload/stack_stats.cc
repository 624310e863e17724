#include "bench/workload/stack_stats.h"

#include <algorithm>

namespace vstack::bench {

std::vector<BlockDevice*> StackLayers(BlockDevice& top) {
  std::vector<BlockDevice*> chain;
  for (BlockDevice* d = &top; d != nullptr; d = d->lower()) chain.push_back(d);
  return chain;
}

void SetStackStatsMode(BlockDevice& top, StatsMode mode) {
  for (BlockDevice* d : StackLayers(top)) d->SetStatsMode(mode);
}

ScopedStackStatsMode::ScopedStackStatsMode(BlockDevice& top, StatsMode mode) {
  for (BlockDevice* d : StackLayers(top)) {
    saved_.emplace_back(d, d->stats_mode());
    d->SetStatsMode(mode);
  }
}

ScopedStackStatsMode::~ScopedStackStatsMode() {
  for (auto& [d, mode] : saved_) d->SetStatsMode(mode);
}

std::vector<LayerStats> SnapshotStack(BlockDevice& top) {
  std::vector<LayerStats> out;
  for (BlockDevice* d : StackLayers(top)) out.push_back(d->Stats());
  return out;
}

std::vector<LayerDelta> StackDelta(BlockDevice& top, const std::vector<LayerStats>& before,
                                   const std::vector<LayerStats>& after) {
  std::vector<LayerDelta> out;
  const std::vector<BlockDevice*> chain = StackLayers(top);
  for (size_t i = 0; i < chain.size() && i < before.size() && i < after.size(); ++i) {
    const LayerStats d = after[i].CountsSince(before[i]);
    LayerDelta l;
    l.kind = chain[i]->kind();
    l.description = chain[i]->Describe();
    for (int op = 0; op < kOpCount; ++op) {
      l.ops[op] = d.op[op].ops;
      l.bytes[op] = d.op[op].bytes;
      l.errors[op] = d.op[op].errors;
      l.latency_sum_ns[op] = after[i].latency[op].sum() - before[i].latency[op].sum();
      l.latency[op] = WindowHistogram::Between(before[i].latency[op], after[i].latency[op]);
    }
    l.level = static_cast<int>(std::min<size_t>(chain.size() - 1 - i, kMaxStackDepth - 1));
    l.paths.requests = d.paths.requests;
    l.paths.total_ns = d.paths.total_ns;
    l.paths.negative = d.paths.negative;
    for (int lv = 0; lv < kMaxStackDepth; ++lv) {
      l.paths.self_ns[lv] = d.paths.self_ns[lv];
      l.paths.self[lv] = WindowHistogram::Between(before[i].paths.self[lv], after[i].paths.self[lv]);
    }
    l.counter_names = d.counter_names;
    l.counters = d.counters;
    l.cpu_ns = d.cpu_ns;
    l.cpu_samples = d.cpu_samples;
    l.cpu_phase_ns = d.cpu_phase_ns;
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace vstack::bench
