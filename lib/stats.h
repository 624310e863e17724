// Per-layer statistics. Every queue keeps its own live counters (one writer: the queue's
// thread), so the data path never shares a cache line between threads. A device's Stats()
// sums its live queues and the queues already closed into a LayerStats snapshot.
//
// The base classes fill in ops, bytes, errors and in-flight for every layer. A layer adds its
// own counters (allocations, metadata writes, dedup hits...) by declaring their names once
// (BlockDevice::DeclareCounters) and bumping them per queue (IoQueue::Count) or per device
// (BlockDevice::CountShared). Counters are always on: they cost a few plain adds per request.
//
// Time is a mode (StatsMode, BlockDevice::SetStatsMode). In kCounts, the default, the data path
// reads no clock at all, and no histogram holds bucket memory (lib/histogram.h: buckets are
// allocated by the first sample), so a device and its snapshots are cheap to build and copy.
// In kLatency a queue keeps a latency histogram per op and the self-time
// paths below; the clock is read at most once per submitted batch and once per completion
// batch, and the time is shared through the stack (lib/block_device.cc): a request submitted
// from inside a layer's Submit or a completion callback takes the caller's timestamp, and a
// request a layer completes from its child's callback takes the child's completion time.
//
// Self time. A request's self time at a layer is its latency there minus the latency of the
// lower request whose completion completed it (0 if none did): the layer's own processing, and
// its waits for anything else (its metadata I/O, locks, other pieces running in parallel).
// Every request carries the self time of each level on its path (IoRequest::path_ns_). When a
// request's callback completes no request of the layer above, its path ends there and the
// queue adds the path to its PathStats: at the top of a stack these are the guest's requests,
// so the levels' self times add up exactly to the guest's latency; one level down they are the
// requests the top layer issued for itself (metadata, allocation commits, write-back), whose
// level-0 time is the device's time serving them.
#ifndef VSTACK_LIB_STATS_H_
#define VSTACK_LIB_STATS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/cpu_account.h"
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

enum class StatsMode : uint8_t {
  kCounts,   // counters only; the data path reads no clock
  kLatency,  // + latency histograms and self-time paths (the clock read once per batch)
};

// The requests whose path ended at a layer, and where their time went, level by level
// (index 0 = the backend, a layer's own level = the number of devices below it).
struct PathStats {
  uint64_t requests = 0;
  uint64_t total_ns = 0;    // their summed latency at the layer where the path ended
  // Requests whose lower request began before them (they joined work in flight, e.g. an
  // allocation commit another request started): their path is scaled to their own latency.
  uint64_t negative = 0;
  std::array<uint64_t, kMaxStackDepth> self_ns{};  // summed self time per level
  std::array<LatencyHistogram, kMaxStackDepth> self;  // self time per request, per level

  void Merge(const PathStats& other);
};

// A snapshot of one layer's statistics. Plain values; copy and merge freely.
struct LayerStats {
  std::array<OpCounts, kOpCount> op{};
  std::array<LatencyHistogram, kOpCount> latency;  // submit -> completion, per op (kLatency)
  PathStats paths;                                 // paths that ended here (kLatency)
  uint64_t in_flight = 0;
  std::vector<std::string> counter_names;
  std::vector<uint64_t> counters;  // parallel to counter_names
  // CPU charged to the layer by sampling (lib/cpu_account.h; 0 unless sampling ran), and the
  // samples that charged it; `cpu_ns` includes the phases, and the part of it each phase
  // (CpuPhase, by index) was charged is in `cpu_phase_ns`.
  uint64_t cpu_ns = 0;
  uint64_t cpu_samples = 0;
  std::array<uint64_t, kCpuPhaseCount> cpu_phase_ns{};

  const OpCounts& of(Op o) const { return op[static_cast<int>(o)]; }
  const LatencyHistogram& latency_of(Op o) const { return latency[static_cast<int>(o)]; }
  // Value of the layer counter `name`; 0 if the layer has no such counter.
  uint64_t counter(const std::string& name) const;
  // Adds `other` into this snapshot (counters matched by name).
  void Merge(const LayerStats& other);
  // Every counter difference this - earlier (paths' sums included), for measuring an
  // interval. Histograms are not subtracted; take a snapshot with fresh queues for per-interval latency.
  LayerStats CountsSince(const LayerStats& earlier) const;
};

// The live statistics of one queue. Written only by the queue's thread.
class QueueStats {
 public:
  // `latency`: keep histograms and paths (StatsMode::kLatency), fixed for the queue's life.
  QueueStats(size_t custom_counters, bool latency);

  bool latency() const { return time_ != nullptr; }
  void OnSubmit() { in_flight_.Add(); }
  void OnComplete(Op op, uint64_t bytes, bool error) {
    int i = static_cast<int>(op);
    in_flight_.Sub();
    ops_[i].Add();
    bytes_[i].Add(bytes);
    if (error) errors_[i].Add();
  }
  // REQUIRES: latency().
  void OnLatency(Op op, uint64_t latency_ns) {
    time_->latency[static_cast<int>(op)].Record(latency_ns);
  }
  void OnNegativeSelf() { time_->negative.Add(); }
  // A path ended here: `levels` self times (index = level) adding up to `total_ns`.
  void OnPathEnd(const uint32_t* path_ns, int levels, uint64_t total_ns);
  void Count(size_t id, uint64_t n) { custom_[id].Add(n); }

  // Adds this queue's numbers into `out` (whose counters vector is already sized); the
  // histograms only if `histograms`.
  void AddTo(LayerStats& out, bool histograms = true) const;

 private:
  // Its histograms' buckets are allocated with it (Reserve), so the data path never allocates.
  struct Time {
    Time();
    std::array<LatencyHistogram, kOpCount> latency;
    RelaxedCounter total_ns, negative;
    // Every path records all its levels, so level 0 counts the paths, and each level's sum is
    // its summed self time (PathStats::requests and self_ns).
    std::array<LatencyHistogram, kMaxStackDepth> self;
  };
  std::array<RelaxedCounter, kOpCount> ops_, bytes_, errors_;
  RelaxedCounter in_flight_;
  std::vector<RelaxedCounter> custom_;
  std::unique_ptr<Time> time_;  // kLatency only
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_STATS_H_
