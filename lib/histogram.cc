#include "lib/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vstack {

LatencyHistogram::~LatencyHistogram() { delete buckets_.load(std::memory_order_relaxed); }

LatencyHistogram::Buckets* LatencyHistogram::Allocate() {
  Buckets* b = new Buckets();
  buckets_.store(b, std::memory_order_release);
  return b;
}

void LatencyHistogram::Reserve() {
  if (buckets_.load(std::memory_order_relaxed) == nullptr) Allocate();
}

LatencyHistogram& LatencyHistogram::operator=(const LatencyHistogram& other) {
  if (this == &other) return *this;
  const Buckets* from = other.buckets_.load(std::memory_order_acquire);
  Buckets* to = buckets_.load(std::memory_order_relaxed);
  if (from != nullptr && to == nullptr) to = Allocate();
  if (to != nullptr) {  // with no buckets on either side, both are all zeros
    for (int b = 0; b < kBuckets; ++b) (*to)[b].Set(from != nullptr ? (*from)[b].Get() : 0);
  }
  count_.Set(other.count_.Get());
  zeros_.Set(other.zeros_.Get());
  sum_.Set(other.sum_.Get());
  max_.Set(other.max_.Get());
  min_.Set(other.min_.Get());
  sum_sq_.store(other.sum_sq_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  return *this;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (const Buckets* from = other.buckets_.load(std::memory_order_acquire)) {
    Buckets* to = buckets_.load(std::memory_order_relaxed);
    if (to == nullptr) to = Allocate();
    for (int b = 0; b < kBuckets; ++b) {
      uint64_t n = (*from)[b].Get();
      if (n) (*to)[b].Add(n);
    }
  }
  count_.Add(other.count_.Get());
  zeros_.Add(other.zeros_.Get());
  sum_.Add(other.sum_.Get());
  sum_sq_.store(sum_sq_.load(std::memory_order_relaxed) +
                    other.sum_sq_.load(std::memory_order_relaxed),
                std::memory_order_relaxed);
  min_.Set(std::min(min_.Get(), other.min_.Get()));
  max_.Set(std::max(max_.Get(), other.max_.Get()));
}

void LatencyHistogram::Reset() { *this = LatencyHistogram(); }

double LatencyHistogram::mean() const {
  uint64_t n = count();
  return n ? double(sum()) / double(n) : 0.0;
}

double LatencyHistogram::stddev() const {
  uint64_t n = count();
  if (n < 2) return 0.0;
  double m = mean();
  double var = sum_sq_.load(std::memory_order_relaxed) / double(n) - m * m;
  return var > 0 ? std::sqrt(var) : 0.0;
}

uint64_t LatencyHistogram::BucketLow(int b) {
  int group = b >> kSubBits;
  uint64_t sub = static_cast<uint64_t>(b & ((1 << kSubBits) - 1));
  if (group == 0) return sub;
  return ((1ull << kSubBits) + sub) << (group - 1);
}

uint64_t LatencyHistogram::BucketWidth(int b) {
  int group = b >> kSubBits;
  return group == 0 ? 1 : 1ull << (group - 1);
}

uint64_t LatencyHistogram::Percentile(double p) const {
  uint64_t n = count();
  if (n == 0) return 0;
  if (p <= 0) return min();
  if (p >= 100) return max();
  // The rank of the sample at percentile p (1-based, nearest-rank method).
  uint64_t rank = static_cast<uint64_t>(std::ceil(p / 100.0 * double(n)));
  rank = std::clamp<uint64_t>(rank, 1, n);
  uint64_t seen = zeros_.Get();  // bucket 0's samples counted apart
  if (seen >= rank) return 0;
  const Buckets* buckets = buckets_.load(std::memory_order_acquire);
  if (buckets == nullptr) return max();  // a copy taken while the first sample was recorded
  for (int b = 0; b < kBuckets; ++b) {
    seen += (*buckets)[b].Get();
    if (seen >= rank) {
      uint64_t mid = BucketLow(b) + BucketWidth(b) / 2;
      return std::clamp(mid, min(), max());
    }
  }
  return max();
}

}  // namespace vstack
