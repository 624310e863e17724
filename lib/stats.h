// Per-layer statistics. Every queue keeps its own live counters (one writer: the queue's
// thread), so the data path never shares a cache line between threads. A device's Stats()
// sums its live queues and the queues already closed into a LayerStats snapshot.
//
// The base classes fill in ops, bytes, errors, in-flight and latency for every layer. A layer
// adds its own counters (allocations, metadata writes, dedup hits...) by declaring their names
// once (BlockDevice::DeclareCounters) and bumping them per queue (IoQueue::Count) or per device
// (BlockDevice::CountShared).
#ifndef VSTACK_LIB_STATS_H_
#define VSTACK_LIB_STATS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/export.h"
#include "lib/histogram.h"
#include "lib/io_request.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

struct OpCounts {
  uint64_t ops = 0;     // completed requests
  uint64_t bytes = 0;   // bytes of completed requests (read/write/discard/write-zeroes)
  uint64_t errors = 0;  // requests completed with an error
};

// A snapshot of one layer's statistics. Plain values; copy and merge freely.
struct LayerStats {
  std::array<OpCounts, kOpCount> op{};
  std::array<LatencyHistogram, kOpCount> latency;  // submit -> completion, per op
  uint64_t in_flight = 0;
  std::vector<std::string> counter_names;
  std::vector<uint64_t> counters;  // parallel to counter_names

  const OpCounts& of(Op o) const { return op[static_cast<int>(o)]; }
  const LatencyHistogram& latency_of(Op o) const { return latency[static_cast<int>(o)]; }
  // Value of the layer counter `name`; 0 if the layer has no such counter.
  uint64_t counter(const std::string& name) const;
  // Adds `other` into this snapshot (counters matched by name).
  void Merge(const LayerStats& other);
  // Every counter difference this - earlier, for measuring an interval. Histograms are not
  // subtracted; take a snapshot with fresh queues for per-interval latency.
  LayerStats CountsSince(const LayerStats& earlier) const;
};

// The live statistics of one queue. Written only by the queue's thread.
class QueueStats {
 public:
  explicit QueueStats(size_t custom_counters) : custom_(custom_counters) {}

  void OnSubmit() { in_flight_.Add(); }
  void OnComplete(Op op, uint64_t bytes, bool error, uint64_t latency_ns) {
    int i = static_cast<int>(op);
    in_flight_.Sub();
    ops_[i].Add();
    bytes_[i].Add(bytes);
    if (error) errors_[i].Add();
    latency_[i].Record(latency_ns);
  }
  void Count(size_t id, uint64_t n) { custom_[id].Add(n); }

  // Adds this queue's numbers into `out` (whose counters vector is already sized).
  void AddTo(LayerStats& out) const;

 private:
  std::array<RelaxedCounter, kOpCount> ops_, bytes_, errors_;
  std::array<LatencyHistogram, kOpCount> latency_;
  RelaxedCounter in_flight_;
  std::vector<RelaxedCounter> custom_;
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_STATS_H_
