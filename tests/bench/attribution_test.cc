// Per-layer self time (lib/stats.h paths) and the attribution built on it
// (bench/workload/attribution.h) on real stacks: the layers' self times and the device's time
// add up to the latency the caller measured, the time lands at the layer that spends it, and a
// layer's own metadata I/O shows apart from the guest's data I/O.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "bench/workload/attribution.h"
#include "bench/workload/stack_stats.h"
#include "bench/workload/summary.h"
#include "formats/vhd/vhd_create.h"
#include "formats/vhd/vhd_device.h"
#include "lib/aligned_buffer.h"
#include "lib/clock.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"

namespace vstack::bench {
namespace {

// Measures `kReads` reads through `dev` with the caller's own clock and attributes them.
Attribution MeasureReads(BlockDevice& dev) {
  constexpr int kReads = 12;
  const std::vector<LayerStats> before = SnapshotStack(dev);
  uint64_t measured_ns = 0;
  {
    SyncIo io(dev);
    AlignedBuffer buf(4096);
    for (int i = 0; i < kReads; ++i) {
      const uint64_t start = NowNs();
      EXPECT_FALSE(io.Read(uint64_t(i) * 4096, buf.span()));
      measured_ns += NowNs() - start;
    }
  }
  const std::vector<LayerStats> after = SnapshotStack(dev);
  return Attribute(StackDelta(dev, before, after), Us(double(measured_ns) / kReads));
}

TEST(SelfTime, AddsUpToTheMeasuredLatencyWithADelayAtAKnownLayer) {
  auto dev = Open("passthrough+delay:read=3ms+passthrough+memory:16M");
  ASSERT_TRUE(dev) << dev.error().ToString();
  SetStackStatsMode(**dev, StatsMode::kLatency);
  constexpr uint64_t kReads = 12;
  // The caller's clock also sees what happens outside the stack: a preemption of this thread
  // between a completion and its clock read (a loaded CI machine, under ASan, once measured
  // +12%). That disturbance is the machine's, not the attribution's, so up to three
  // measurements are made and one within 5% passes; a systematic gap fails all three.
  // The delay's median is the machine's too (below): a measurement whose median and mean
  // disagree by more than 2x is made again as well.
  const auto disturbed = [](const Attribution& m) {
    if (std::fabs(m.residual_pct) >= 5.0) return true;
    if (m.layers.size() < 2) return false;
    const LayerCost& d = m.layers[1];
    return d.self_median_us_per_io < d.self_us_per_io / 2 ||
           d.self_median_us_per_io > d.self_us_per_io * 2;
  };
  Attribution a = MeasureReads(**dev);
  for (int attempt = 1; attempt < 3 && disturbed(a); ++attempt) a = MeasureReads(**dev);
  ASSERT_TRUE(a.timed);
  ASSERT_EQ(a.layers.size(), 4u);
  EXPECT_EQ(a.guest_ios, kReads);
  EXPECT_EQ(a.joined, 0u);
  // The paths add up exactly to the top layer's latency; the caller's own measurement adds
  // only its Submit/Poll overhead: the 5% bound.
  EXPECT_NEAR(a.sum_us, a.end_to_end_us, 0.01);
  if (!testing::kSanitizedBuild) {
    // Under ASan/TSan the caller's own path between a completion and its clock read is slowed
    // several-fold (measured +11-12% on CI), which is the sanitizer's cost, not the stack's.
    EXPECT_LT(std::fabs(a.residual_pct), 5.0) << a.sum_us << " vs " << a.measured_us;
  }
  // The delay layer holds the time it waits (3 ms per read) and nobody else does. On a loaded
  // host it delivers some reads early to keep their mean on the deadline (DeadlineWaiter's
  // lateness correction, learned over the earlier measurements), so "at least 3 ms" holds
  // within 10% for the mean. The median of 12 reads can sit further below when a few late
  // wake-ups pull the others early (2.59 ms seen at load 8 on 2 CPUs; 0.76 ms against a mean of
  // 2.96 ms in one CI run while other builds loaded the machine); what it must never do is
  // contradict the mean in order of magnitude, as a time charged to the wrong layer would.
  const LayerCost& delay = a.layers[1];
  EXPECT_EQ(delay.kind, "delay");
  EXPECT_GE(delay.self_us_per_io, 3000.0 * 0.9);
  EXPECT_GE(delay.self_median_us_per_io, delay.self_us_per_io / 4);
  EXPECT_LE(delay.self_median_us_per_io, delay.self_us_per_io * 4);
  EXPECT_GT(delay.self_us_per_io, a.sum_us / 2);
  EXPECT_NE(delay.words.find("self "), std::string::npos) << delay.words;
  EXPECT_TRUE(a.layers[3].backend);
}

TEST(SelfTime, CountsModeMeasuresNoTimeAndSaysSo) {
  auto dev = Open("passthrough+memory:1M");
  ASSERT_TRUE(dev);
  const std::vector<LayerStats> before = SnapshotStack(**dev);
  {
    SyncIo io(**dev);
    AlignedBuffer buf(4096);
    ASSERT_FALSE(io.Read(0, buf.span()));
  }
  const std::vector<LayerStats> after = SnapshotStack(**dev);
  EXPECT_EQ(after[0].of(Op::kRead).ops, 1u);  // counters stay on
  EXPECT_EQ(after[0].latency_of(Op::kRead).count(), 0u);
  const Attribution a = Attribute(StackDelta(**dev, before, after));
  EXPECT_FALSE(a.timed);
  EXPECT_NE(a.layers[0].words.find("self time not measured"), std::string::npos)
      << a.layers[0].words;
}

TEST(SelfTime, AVhdAllocationIsTheLayersOwnIoApartFromTheGuestData) {
  vhd::CreateParams p;
  p.requested_size = 16ull << 20;
  p.dynamic = true;
  vstack::testing::TempDir dir;  // a file, so that the image can grow as blocks are allocated
  auto file = Open("file:" + dir.File("d.vhd") + ",create=on,size=" +
                   std::to_string(vhd::NewImageFileSize(p)));
  ASSERT_TRUE(file) << file.error().ToString();
  ASSERT_TRUE(vhd::WriteNewImage(**file, p));
  auto dev = vhd::VhdDevice::Open(std::move(*file));
  ASSERT_TRUE(dev) << dev.error().ToString();
  SetStackStatsMode(**dev, StatsMode::kLatency);
  const std::vector<LayerStats> before = SnapshotStack(**dev);
  {
    SyncIo io(**dev);
    AlignedBuffer buf(4096);
    std::memset(buf.data(), 0x5A, 4096);
    for (int b = 0; b < 4; ++b) {  // four blocks allocated, then overwritten
      for (int again = 0; again < 2; ++again) {
        const std::error_code ec = io.Write(uint64_t(b) * (2u << 20), buf.span());
        ASSERT_FALSE(ec) << ec.message();
      }
    }
  }
  const std::vector<LayerStats> after = SnapshotStack(**dev);
  const Attribution a = Attribute(StackDelta(**dev, before, after));
  ASSERT_TRUE(a.timed);
  ASSERT_EQ(a.layers.size(), 2u);
  EXPECT_EQ(a.guest_ios, 8u);
  EXPECT_NEAR(a.sum_us, a.end_to_end_us, 0.01);
  // The allocations' metadata writes (BAT, bitmap, footer) are vhd's own I/O: paths that
  // ended at the file, more than one file request per guest write in all.
  const LayerCost& v = a.layers[0];
  EXPECT_GT(v.own_requests_per_io, 0.0);
  EXPECT_GT(v.out_total, v.in_total);
  EXPECT_GE(v.own_device_us_per_io, 0.0);
  EXPECT_NE(v.words.find("its own I/O below"), std::string::npos) << v.words;
}

// The device sentence of the gap: io_uring's workers are named, with the baseline's figure,
// when either stack's ran at least 0.05 us of CPU per guest I/O, and only when both were sampled.
TEST(DeviceSentence, NamesTheIoUringWorkersWhenEitherStackUsedThem) {
  Attribution a, base;
  a.layers.resize(2);
  base.layers.resize(1);
  a.layers.back().in_total = 1.04;
  a.layers.back().self_us_per_io = 381.3;
  base.layers.back().in_total = 1.0;
  base.layers.back().self_us_per_io = 260.6;
  a.cpu_sampled = base.cpu_sampled = true;
  a.outside_uring_us_per_io = 0.75;
  const std::string with = DeviceSentence(a, base, "raw");
  EXPECT_NE(with.find("gets 1.04 requests per guest I/O (raw: 1.00) and spends 381.3 us per "
                      "guest I/O (raw: 260.6 us)."),
            std::string::npos)
      << with;
  EXPECT_NE(with.find("io_uring's kernel workers ran 0.75 us of CPU per guest I/O (raw: 0.00 us)"),
            std::string::npos)
      << with;

  // The baseline's workers alone are enough to name them (for this stack: 0.00).
  std::swap(a.outside_uring_us_per_io, base.outside_uring_us_per_io);
  EXPECT_NE(DeviceSentence(a, base, "raw").find("workers ran 0.00 us of CPU per guest I/O (raw: 0.75 us)"),
            std::string::npos);

  a.outside_uring_us_per_io = 0.04;
  base.outside_uring_us_per_io = 0.0;
  EXPECT_EQ(DeviceSentence(a, base, "raw").find("workers"), std::string::npos);

  a.outside_uring_us_per_io = 0.75;
  base.cpu_sampled = false;  // no CPU figures for the baseline: nothing to compare with
  EXPECT_EQ(DeviceSentence(a, base, "raw").find("workers"), std::string::npos);

  EXPECT_EQ(DeviceSentence(Attribution{}, base, "raw"), "");
}

// The device sentence names the flushes the layers send below by themselves (the device's
// flushes beyond the guest's), against the baseline's, from one per 100,000 guest I/Os more.
TEST(DeviceSentence, NamesTheFlushesTheLayersSendByThemselves) {
  constexpr int kFlush = static_cast<int>(Op::kFlush);
  Attribution a, base;
  a.layers.resize(2);
  base.layers.resize(1);
  a.layers.back().in_per_io[kFlush] = 0.0003;
  const std::string with = DeviceSentence(a, base, "raw");
  EXPECT_NE(with.find("flush the device below by themselves, one per 3333 guest I/Os (raw: none)"),
            std::string::npos)
      << with;
  EXPECT_NE(with.find("run raw with as many flushes (--flush-interval) to price it"),
            std::string::npos)
      << "no guest writes counted: no interval to name; " << with;
  // With the guest's writes counted, the interval that gives the baseline as many flushes as
  // this stack's device got: 0.5 writes / 0.0003 flushes per guest I/O, a flush per 1667 writes.
  a.layers.front().in_per_io[static_cast<int>(Op::kWrite)] = 0.5;
  EXPECT_NE(DeviceSentence(a, base, "raw").find("run raw with as many flushes (--flush-interval "
                                                "1667) to price it"),
            std::string::npos)
      << DeviceSentence(a, base, "raw");
  EXPECT_EQ(with.find("waited"), std::string::npos) << "no wait counted: none stated";

  // The layers' commits' waits (durable_wait_us) against the measured time: one layer's as it
  // is; stacked layers' overlap (a flush from above commits the layer below), so the longest.
  a.seconds = 10;
  a.layers.back().counters.push_back({kDurableWaitCounter, 500'000, 0});
  EXPECT_NE(DeviceSentence(a, base, "raw").find("(raw: none), and their commits waited 500 ms for "
                                                "flushes and FUA writes below (5.0% of the "
                                                "measured time); each flush"),
            std::string::npos)
      << DeviceSentence(a, base, "raw");
  a.layers.front().kind = "dedup";
  a.layers.back().kind = "zstd";
  a.layers.front().counters.push_back({kDurableWaitCounter, 1'500'000, 0});
  EXPECT_NE(DeviceSentence(a, base, "raw").find("waited 1500 ms for flushes and FUA writes below "
                                                "(15.0% of the measured time; dedup 1500 ms, zstd "
                                                "500 ms, overlapping where one's flush commits "
                                                "the other)"),
            std::string::npos)
      << DeviceSentence(a, base, "raw");
  a.layers.front().counters.clear();
  a.layers.back().counters.clear();

  // The guest's own flushes are not the layers': a flush asked for at the top and passed down.
  a.layers.front().in_per_io[kFlush] = 0.0003;
  EXPECT_EQ(DeviceSentence(a, base, "raw").find("by themselves"), std::string::npos);

  // Below one per 100,000 guest I/Os, or no more than the baseline's own: not named.
  a.layers.front().in_per_io[kFlush] = 0;
  a.layers.back().in_per_io[kFlush] = 0.000009;
  EXPECT_EQ(DeviceSentence(a, base, "raw").find("by themselves"), std::string::npos);
  Attribution base2;
  base2.layers.resize(2);
  base2.layers.back().in_per_io[kFlush] = 0.0003;
  a.layers.back().in_per_io[kFlush] = 0.0003;
  EXPECT_EQ(DeviceSentence(a, base2, "vhd").find("by themselves"), std::string::npos);
  a.layers.back().in_per_io[kFlush] = 0.0005;
  EXPECT_NE(DeviceSentence(a, base2, "vhd").find("one per 2000 guest I/Os (vhd: one per 3333 guest I/Os)"),
            std::string::npos);
}

}  // namespace
}  // namespace vstack::bench
