// A log-linear latency histogram with fixed memory (about 9 KiB of buckets), mergeable across
// threads and layers. Values are nanoseconds. Buckets are exact below 32 ns; above, each power
// of two is split into 32 equal buckets, so a reported percentile is within 3.2% of the true
// value. Values above 2^40 ns (about 18 minutes) land in the last bucket; min, max, sum and sum
// of squares are kept exactly.
//
// Zero is counted apart (a store, no bucket arithmetic): it is the common value of a self time
// below the clock's resolution, recorded per request at every synchronous level of a timed
// stack (lib/stats.h). Readers see it in bucket 0, in count() and min() as any other sample.
//
// The buckets are allocated by the first sample above 0 (Record, or a Merge or copy of a histogram that
// has some), or ahead of time by Reserve(): an empty histogram is a few words, so statistics that
// never measure time (StatsMode::kCounts, lib/stats.h) cost no bucket memory to build or copy.
//
// Thread safety: one writer (Record, Merge into, assignment to, Reserve) at a time; any thread
// may read or copy concurrently and sees a slightly stale but never torn count per bucket.
#ifndef VSTACK_LIB_HISTOGRAM_H_
#define VSTACK_LIB_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// A counter with a single writer and many readers: increments compile to plain loads and
// stores, reads never tear.
class RelaxedCounter {
 public:
  RelaxedCounter() = default;
  explicit RelaxedCounter(uint64_t v) : v_(v) {}
  void Add(uint64_t n = 1) {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void Sub(uint64_t n = 1) {
    v_.store(v_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
  }
  void Set(uint64_t n) { v_.store(n, std::memory_order_relaxed); }
  uint64_t Get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 5;
  static constexpr int kMaxBits = 40;
  static constexpr int kBuckets = (kMaxBits - kSubBits + 1) << kSubBits;

  LatencyHistogram() = default;
  LatencyHistogram(const LatencyHistogram& other) { *this = other; }
  LatencyHistogram& operator=(const LatencyHistogram& other);
  ~LatencyHistogram();

  void Record(uint64_t ns) {
    if (ns == 0) {
      zeros_.Add();
      return;
    }
    Buckets* b = buckets_.load(std::memory_order_relaxed);  // the writer's own store
    if (b == nullptr) b = Allocate();
    (*b)[BucketOf(ns)].Add();
    count_.Add();
    sum_.Add(ns);
    sum_sq_.store(sum_sq_.load(std::memory_order_relaxed) + double(ns) * double(ns),
                  std::memory_order_relaxed);
    if (ns < min_.Get()) min_.Set(ns);
    if (ns > max_.Get()) max_.Set(ns);
  }
  // Adds every sample of `other` to this histogram.
  void Merge(const LatencyHistogram& other);
  // Zeroes every sample (the buckets, once allocated, stay).
  void Reset();
  // Allocates the buckets now, so that no later Record allocates (a data path measuring time).
  void Reserve();
  // True once the buckets are allocated.
  bool allocated() const { return buckets_.load(std::memory_order_acquire) != nullptr; }

  uint64_t count() const { return count_.Get() + zeros_.Get(); }
  uint64_t sum() const { return sum_.Get(); }
  uint64_t min() const { return zeros_.Get() == 0 && count_.Get() != 0 ? min_.Get() : 0; }
  uint64_t max() const { return max_.Get(); }
  double mean() const;
  double stddev() const;
  // The value at percentile `p` (0..100): the midpoint of the bucket holding that rank,
  // clamped to [min, max]. 0 when empty.
  uint64_t Percentile(double p) const;
  uint64_t bucket_count(int b) const {
    const Buckets* p = buckets_.load(std::memory_order_acquire);
    return (p != nullptr ? (*p)[b].Get() : 0) + (b == 0 ? zeros_.Get() : 0);
  }

  static int BucketOf(uint64_t v) {
    if (v < (1ull << kSubBits)) return static_cast<int>(v);
    int msb = 63 - __builtin_clzll(v);
    if (msb >= kMaxBits) return kBuckets - 1;
    int shift = msb - kSubBits;
    return ((shift + 1) << kSubBits) + static_cast<int>((v >> shift) - (1ull << kSubBits));
  }
  static uint64_t BucketLow(int b);
  static uint64_t BucketWidth(int b);

 private:
  using Buckets = std::array<RelaxedCounter, kBuckets>;
  // Allocates zeroed buckets and publishes them to readers. REQUIRES: none yet; the writer.
  Buckets* Allocate();

  std::atomic<Buckets*> buckets_{nullptr};  // owned; null until the first sample or Reserve
  RelaxedCounter count_, sum_, max_;  // of the samples above 0
  RelaxedCounter zeros_;               // samples of 0, not in the buckets
  RelaxedCounter min_{UINT64_MAX};
  std::atomic<double> sum_sq_{0};
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_HISTOGRAM_H_
