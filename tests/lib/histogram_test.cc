#include "lib/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace vstack {
namespace {

TEST(LatencyHistogram, BucketsAreContiguousAndCoverEveryValue) {
  for (int b = 0; b + 1 < LatencyHistogram::kBuckets; ++b) {
    EXPECT_EQ(LatencyHistogram::BucketLow(b) + LatencyHistogram::BucketWidth(b),
              LatencyHistogram::BucketLow(b + 1))
        << "bucket " << b;
  }
  for (uint64_t v : {0ull, 1ull, 31ull, 32ull, 33ull, 63ull, 64ull, 1000ull, 123456789ull,
                     (1ull << 39) + 5}) {
    const int b = LatencyHistogram::BucketOf(v);
    EXPECT_LE(LatencyHistogram::BucketLow(b), v);
    EXPECT_LT(v, LatencyHistogram::BucketLow(b) + LatencyHistogram::BucketWidth(b));
  }
  EXPECT_EQ(LatencyHistogram::BucketOf(UINT64_MAX), LatencyHistogram::kBuckets - 1);
}

TEST(LatencyHistogram, PercentilesAreWithinThreePercent) {
  std::mt19937_64 gen(42);
  std::lognormal_distribution<double> dist(10.0, 1.5);
  std::vector<uint64_t> samples;
  LatencyHistogram h;
  for (int i = 0; i < 100000; ++i) {
    uint64_t v = static_cast<uint64_t>(dist(gen)) + 1;
    samples.push_back(v);
    h.Record(v);
  }
  std::sort(samples.begin(), samples.end());
  for (double p : {1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 99.99}) {
    const uint64_t exact = samples[static_cast<size_t>(std::ceil(p / 100 * samples.size())) - 1];
    const double got = static_cast<double>(h.Percentile(p));
    EXPECT_NEAR(got, static_cast<double>(exact), 0.032 * static_cast<double>(exact) + 1)
        << "p" << p;
  }
  EXPECT_EQ(h.Percentile(0), samples.front());
  EXPECT_EQ(h.Percentile(100), samples.back());
  EXPECT_EQ(h.min(), samples.front());
  EXPECT_EQ(h.max(), samples.back());
  EXPECT_EQ(h.count(), samples.size());
}

TEST(LatencyHistogram, MeanAndStddevAreExact) {
  LatencyHistogram h;
  for (uint64_t v : {10, 20, 30, 40}) h.Record(v);
  EXPECT_DOUBLE_EQ(h.mean(), 25.0);
  EXPECT_NEAR(h.stddev(), 11.1803, 1e-3);  // population stddev
}

TEST(LatencyHistogram, MergeEqualsRecordingEverything) {
  LatencyHistogram a, b, all;
  for (uint64_t v = 1; v < 5000; v += 7) {
    (v % 2 ? a : b).Record(v * 13);
    all.Record(v * 13);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.sum(), all.sum());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  for (double p : {50.0, 99.0}) EXPECT_EQ(a.Percentile(p), all.Percentile(p));
  LatencyHistogram empty;
  EXPECT_EQ(empty.Percentile(50), 0u);
  EXPECT_EQ(empty.min(), 0u);
  a.Merge(empty);
  EXPECT_EQ(a.count(), all.count());
}

// Buckets exist only once there is a sample to keep; copies, merges and resets behave the same
// with or without them.
TEST(LatencyHistogram, BucketsAreAllocatedByTheFirstSample) {
  LatencyHistogram empty;
  EXPECT_FALSE(empty.allocated());
  LatencyHistogram copy = empty, merged;
  merged.Merge(empty);
  EXPECT_FALSE(copy.allocated());
  EXPECT_FALSE(merged.allocated());
  EXPECT_EQ(copy.bucket_count(LatencyHistogram::BucketOf(1000)), 0u);
  EXPECT_EQ(copy.Percentile(50), 0u);

  LatencyHistogram h;
  h.Record(1000);
  h.Record(1000);
  h.Record(50);
  EXPECT_TRUE(h.allocated());
  merged.Merge(h);
  copy = h;
  for (const LatencyHistogram* x : {&merged, &copy}) {
    EXPECT_TRUE(x->allocated());
    EXPECT_EQ(x->bucket_count(LatencyHistogram::BucketOf(1000)), 2u);
    EXPECT_EQ(x->bucket_count(LatencyHistogram::BucketOf(50)), 1u);
    EXPECT_EQ(x->Percentile(50), h.Percentile(50));
  }
  copy = empty;  // zeroes the buckets, which stay allocated
  EXPECT_EQ(copy.count(), 0u);
  EXPECT_EQ(copy.bucket_count(LatencyHistogram::BucketOf(1000)), 0u);
  h.Reset();
  EXPECT_EQ(h.bucket_count(LatencyHistogram::BucketOf(1000)), 0u);
  h.Record(7);
  EXPECT_EQ(h.Percentile(50), 7u);

  LatencyHistogram reserved;
  reserved.Reserve();
  EXPECT_TRUE(reserved.allocated());
  EXPECT_EQ(reserved.count(), 0u);
}

// Zeros (a synchronous level's self time) are counted apart from the buckets; every reader
// sees them as samples in bucket 0, through copies and merges.
TEST(LatencyHistogram, ZerosAreSamplesInBucketZero) {
  LatencyHistogram h;
  for (int i = 0; i < 3; ++i) h.Record(0);
  EXPECT_FALSE(h.allocated()) << "zeros need no buckets";
  EXPECT_EQ(h.count(), 3u);
  EXPECT_EQ(h.bucket_count(0), 3u);
  EXPECT_EQ(h.Percentile(50), 0u);
  EXPECT_EQ(h.Percentile(100), 0u);
  h.Record(40);
  h.Record(0);
  EXPECT_EQ(h.count(), 5u);
  EXPECT_EQ(h.sum(), 40u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 40u);
  EXPECT_EQ(h.bucket_count(0), 4u);
  EXPECT_EQ(h.Percentile(80), 0u);
  EXPECT_EQ(h.Percentile(81), h.Percentile(100));
  EXPECT_DOUBLE_EQ(h.mean(), 8.0);
  EXPECT_DOUBLE_EQ(h.stddev(), 16.0);  // population: sqrt(1600/5 - 64)

  LatencyHistogram copy = h, merged, nonzero;
  merged.Merge(h);
  merged.Merge(h);
  nonzero.Record(40);
  EXPECT_EQ(copy.count(), 5u);
  EXPECT_EQ(copy.bucket_count(0), 4u);
  EXPECT_EQ(merged.count(), 10u);
  EXPECT_EQ(merged.bucket_count(0), 8u);
  EXPECT_EQ(merged.min(), 0u);
  EXPECT_EQ(nonzero.min(), 40u);
  copy.Reset();
  EXPECT_EQ(copy.count(), 0u);
  EXPECT_EQ(copy.bucket_count(0), 0u);
}

}  // namespace
}  // namespace vstack
