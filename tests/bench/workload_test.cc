// The workload engine's building blocks: knob validation, offsets (uniform, sequential, zipf),
// write-buffer content (unique, deduplicated, compressible, zeros), CPU sampling and the host's
// CPU Ready (schedstat parsing and arithmetic, on synthetic input).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "bench/workload/cpu_usage.h"
#include "bench/workload/host_ready.h"
#include "bench/workload/knobs.h"
#include "bench/workload/offsets.h"
#include "bench/workload/write_content.h"
#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "tests/testing/test_util.h"

namespace vstack::bench {
namespace {

// The error message of a failed validation, "" if it passed.
std::string Problem(const WorkloadKnobs& k) {
  Status s = ValidateKnobs(k);
  return s ? "" : s.error().message;
}

TEST(WorkloadKnobs, DefaultsAreValid) { EXPECT_EQ(Problem(WorkloadKnobs{}), ""); }

TEST(WorkloadKnobs, EachBadKnobIsRejectedNamingItsFlag) {
  struct Case {
    void (*mutate)(WorkloadKnobs&);
    const char* flag;
  };
  const Case cases[] = {
      {[](WorkloadKnobs& k) { k.block_size = 0; }, "--bs"},
      {[](WorkloadKnobs& k) { k.block_size = 1000; }, "--bs"},
      {[](WorkloadKnobs& k) { k.write_pct = 101; }, "--write-pct"},
      {[](WorkloadKnobs& k) { k.queue_depth = 0; }, "--qd"},
      {[](WorkloadKnobs& k) { k.queue_depth = 5000; }, "--qd"},
      {[](WorkloadKnobs& k) { k.threads = 0; }, "--threads"},
      {[](WorkloadKnobs& k) { k.duration_s = 0; }, "--duration"},
      {[](WorkloadKnobs& k) { k.duration_s = -1; }, "--duration"},
      {[](WorkloadKnobs& k) { k.warmup_s = -0.5; }, "--warmup"},
      {[](WorkloadKnobs& k) { k.target_size = 4096; }, "--size"},
      {[](WorkloadKnobs& k) { k.dedupe_pct = 150; }, "--dedupe-pct"},
      {[](WorkloadKnobs& k) { k.compress_pct = 101; }, "--compress-pct"},
      {[](WorkloadKnobs& k) { k.content = Content::kZeros; k.dedupe_pct = 10; }, "--content"},
      {[](WorkloadKnobs& k) { k.write_pct = 0; k.flush_interval = 8; }, "--flush-interval"},
      {[](WorkloadKnobs& k) { k.distribution = Distribution::kZipf; k.zipf_theta = 1.0; }, "--distribution"},
      {[](WorkloadKnobs& k) {
         k.distribution = Distribution::kZipf;
         k.pattern = AccessPattern::kSequential;
       }, "--distribution"},
      {[](WorkloadKnobs& k) { k.task_cpu = "exp:700us"; }, "--task-cpu"},  // no scheduler
      {[](WorkloadKnobs& k) { k.quantum_ns = 4'000'000; k.task_cpu = "lots"; }, "--task-cpu"},
      {[](WorkloadKnobs& k) { k.quantum_ns = 4'000'000; k.task_cpu_sleeps = true; }, "--task-cpu-mode"},
      {[](WorkloadKnobs& k) { k.exchange = true; k.queue_depth = 2; }, "--exchange"},
  };
  for (const Case& c : cases) {
    WorkloadKnobs k;
    c.mutate(k);
    const std::string p = Problem(k);
    EXPECT_EQ(p.rfind(c.flag, 0), 0u) << "expected an error naming " << c.flag << ", got '" << p << "'";
  }
  WorkloadKnobs counted;
  counted.io_count = 1000;
  counted.duration_s = 0;  // an I/O count needs no duration
  EXPECT_EQ(Problem(counted), "");
}

TEST(WorkloadKnobs, DistributionParsing) {
  WorkloadKnobs k;
  ASSERT_OK(ParseDistribution("zipf:0.8", &k));
  EXPECT_EQ(k.distribution, Distribution::kZipf);
  EXPECT_DOUBLE_EQ(k.zipf_theta, 0.8);
  EXPECT_EQ(DescribeDistribution(k), "zipf:0.8");
  ASSERT_OK(ParseDistribution("uniform", &k));
  EXPECT_EQ(k.distribution, Distribution::kUniform);
  for (const char* bad : {"zipf", "zipf:", "zipf:x", "pareto:1", ""}) {
    EXPECT_FALSE(ParseDistribution(bad, &k)) << bad;
  }
}

TEST(WorkloadKnobs, CheckedAgainstTheDevice) {
  auto dev = Open("memory:1M,block=4096");
  ASSERT_OK(dev);
  WorkloadKnobs k;
  k.block_size = 512;
  Status s = CheckKnobsAgainstDevice(k, **dev);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("4096-byte logical block"), std::string::npos) << s.error().message;
  k.block_size = 8192;
  EXPECT_OK(CheckKnobsAgainstDevice(k, **dev));
  EXPECT_EQ(RegionBytes(k, **dev), 1u << 20);  // target 256M is capped to the device
  k.target_size = 100000;
  EXPECT_EQ(RegionBytes(k, **dev), 98304u);  // rounded down to the block size
  auto ro = Open("memory:1M", OpenOptions{.read_only = true});
  ASSERT_OK(ro);
  EXPECT_FALSE(CheckKnobsAgainstDevice(WorkloadKnobs{}, **ro));
  k.write_pct = 0;
  EXPECT_OK(CheckKnobsAgainstDevice(k, **ro));
}

TEST(Offsets, UniformStaysAlignedInsideTheRegionAndCoversIt) {
  WorkloadKnobs k;
  k.block_size = 4096;
  const uint64_t region = 64 * 4096;
  OffsetGenerator gen(k, region, 0, 1);
  WorkloadRng rng(7, 0);
  std::set<uint64_t> seen;
  for (int i = 0; i < 5000; ++i) {
    const uint64_t off = gen.Next(rng);
    ASSERT_EQ(off % 4096, 0u);
    ASSERT_LT(off, region);
    seen.insert(off);
  }
  EXPECT_EQ(seen.size(), 64u);
}

TEST(Offsets, SequentialThreadsStartApartAndWrap) {
  WorkloadKnobs k;
  k.block_size = 4096;
  k.pattern = AccessPattern::kSequential;
  const uint64_t region = 8 * 4096;
  WorkloadRng rng(1, 0);
  OffsetGenerator t0(k, region, 0, 2), t1(k, region, 1, 2);
  EXPECT_EQ(t0.Next(rng), 0u);
  EXPECT_EQ(t1.Next(rng), 4 * 4096u);
  for (int i = 0; i < 6; ++i) t0.Next(rng);
  EXPECT_EQ(t0.Next(rng), 7 * 4096u);
  EXPECT_EQ(t0.Next(rng), 0u);  // wrapped
}

TEST(Offsets, ZipfFollowsItsLaw) {
  const uint64_t n = 1000;
  const double theta = 1.2;
  ZipfSampler z(n, theta);
  WorkloadRng rng(3, 0);
  std::map<uint64_t, uint64_t> freq;
  const int draws = 200000;
  for (int i = 0; i < draws; ++i) {
    const uint64_t r = z.Sample(rng);
    ASSERT_GE(r, 1u);
    ASSERT_LE(r, n);
    ++freq[r];
  }
  double h = 0;
  for (uint64_t k = 1; k <= n; ++k) h += std::pow(double(k), -theta);
  for (uint64_t rank : {1, 2, 10}) {
    const double expected = std::pow(double(rank), -theta) / h;
    EXPECT_NEAR(double(freq[rank]) / draws, expected, expected * 0.05) << "rank " << rank;
  }
  // Hot ranks are spread over the device, not packed at its start.
  WorkloadKnobs k;
  k.block_size = 4096;
  k.distribution = Distribution::kZipf;
  k.zipf_theta = theta;
  OffsetGenerator gen(k, n * 4096, 0, 1);
  std::map<uint64_t, uint64_t> blocks;
  for (int i = 0; i < 20000; ++i) ++blocks[gen.Next(rng) / 4096];
  uint64_t hottest = 0, hottest_count = 0;
  for (auto [b, c] : blocks) {
    if (c > hottest_count) hottest = b, hottest_count = c;
  }
  EXPECT_NE(hottest, 0u);
  EXPECT_GT(hottest_count, 20000u / 10);
}

// Hashes each 4 KiB chunk of `n` writes made by `content`.
std::vector<std::string> Chunks(WriteContent& content, int n, uint32_t bs, int* repeats) {
  AlignedBuffer buf(bs);
  content.Initialize(buf.data(), bs);
  WorkloadRng rng(5, 0);
  std::vector<std::string> chunks;
  *repeats = 0;
  for (int i = 0; i < n; ++i) {
    if (content.Stamp(buf.data(), bs, rng)) ++*repeats;
    for (uint32_t off = 0; off < bs; off += 4096) {
      chunks.emplace_back(reinterpret_cast<const char*>(buf.data()) + off, 4096);
    }
  }
  return chunks;
}

TEST(WriteContent, UniqueByDefaultAndRepeatsAtTheDedupeRate) {
  WorkloadKnobs k;
  int repeats = 0;
  WriteContent unique(k, 0);
  auto chunks = Chunks(unique, 2000, 8192, &repeats);
  EXPECT_EQ(repeats, 0);
  EXPECT_EQ(std::set<std::string>(chunks.begin(), chunks.end()).size(), chunks.size());

  k.dedupe_pct = 30;
  WriteContent dup(k, 0);
  chunks = Chunks(dup, 4000, 8192, &repeats);
  const std::set<std::string> distinct(chunks.begin(), chunks.end());
  const double dup_share = 1.0 - double(distinct.size()) / double(chunks.size());
  EXPECT_NEAR(dup_share, 0.30, 0.03);
  EXPECT_NEAR(repeats / 4000.0, 0.30, 0.03);

  // Two threads never make the same chunk.
  WriteContent a(WorkloadKnobs{}, 0), b(WorkloadKnobs{}, 1);
  auto ca = Chunks(a, 100, 4096, &repeats), cb = Chunks(b, 100, 4096, &repeats);
  std::set<std::string> both(ca.begin(), ca.end());
  both.insert(cb.begin(), cb.end());
  EXPECT_EQ(both.size(), 200u);
}

TEST(WriteContent, CompressPercentIsTheZeroShareAndZerosAreZeros) {
  WorkloadKnobs k;
  k.compress_pct = 75;
  WriteContent c(k, 0);
  AlignedBuffer buf(16384);
  c.Initialize(buf.data(), 16384);
  WorkloadRng rng(1, 0);
  c.Stamp(buf.data(), 16384, rng);
  size_t zeros = 0;
  for (size_t i = 0; i < 16384; ++i) zeros += buf.data()[i] == std::byte{0};
  EXPECT_NEAR(double(zeros) / 16384, 0.75, 0.01);

  WorkloadKnobs z;
  z.content = Content::kZeros;
  WriteContent zc(z, 0);
  zc.Initialize(buf.data(), 16384);
  zc.Stamp(buf.data(), 16384, rng);
  for (size_t i = 0; i < 16384; ++i) ASSERT_EQ(buf.data()[i], std::byte{0});
}

TEST(CpuUsage, SnapshotsSeeThisProcessWork) {
  const CpuSnapshot a = TakeCpuSnapshot();
  volatile uint64_t x = 0;
  for (uint64_t i = 0; i < 50000000; ++i) x = x + i;
  const CpuSnapshot b = TakeCpuSnapshot();
  const CpuUsage u = CpuBetween(a, b, 1.0);
  EXPECT_GT(u.process_s(), 0.0);
  EXPECT_FALSE(u.cpus.empty()) << "/proc/stat has no cpuN lines";
  EXPECT_GE(u.machine_busy_s() + 0.05, u.process_s() * 0.5);
  EXPECT_GE(u.others_s(), 0.0);
}


TEST(HostReady, ParsesTheThreeSchedstatFields) {
  auto s = ParseSchedStat("1125064 579283 6\n");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->on_cpu_ns, 1125064u);
  EXPECT_EQ(s->run_queue_ns, 579283u);
  EXPECT_EQ(s->timeslices, 6u);
  // 64-bit counters, no trailing newline, a zero wait (a thread that never waited) is a value.
  s = ParseSchedStat("18446744073709551615 0 1");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->on_cpu_ns, UINT64_MAX);
  EXPECT_EQ(s->run_queue_ns, 0u);
}

TEST(HostReady, NoStatisticsOrGarbageIsNotAvailableNeverZero) {
  // The kernel prints "0 0 0" when it keeps no schedule statistics (fs/proc/base.c).
  EXPECT_FALSE(ParseSchedStat("0 0 0\n").has_value());
  for (const char* bad : {"", "\n", "12 34", "12 x 5", "-1 2 3", "1 2 3 4", "1 2 3 junk", "a b c"}) {
    EXPECT_FALSE(ParseSchedStat(bad).has_value()) << "'" << bad << "'";
  }
  EXPECT_FALSE(ReadSchedStat("/proc/self/task/0/schedstat").has_value());  // no thread 0
  // A file that opens but fails to read (here a directory: EISDIR; a thread that exits between
  // the open and the read gives ESRCH): nothing, not an exception (std::ifstream threw here and
  // ended a vstack bench run whose io_uring worker exited).
  EXPECT_FALSE(ReadSchedStat("/proc/self").has_value());
  EXPECT_EQ(ReadProcFile("/proc/self"), "");
  testing::TempDir dir;
  std::ofstream(dir.File("schedstat")) << "500 250 3\n";
  auto s = ReadSchedStat(dir.File("schedstat"));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->run_queue_ns, 250u);
  EXPECT_EQ(ThreadSchedStatPath(1234), "/proc/self/task/1234/schedstat");
}

TEST(HostReady, IsTheRunQueueWaitOverThreadsTimesWallTime) {
  SchedSnapshot before, after;
  before.Add(10, SchedStat{1'000, 5'000'000, 1}, true);
  before.Add(11, SchedStat{1'000, 1'000'000, 1}, true);
  before.Add(12, SchedStat{1'000, 7'000'000, 1}, false);  // a helper that exits in the window
  after.Add(10, SchedStat{9'000, 35'000'000, 9}, true);    // +30 ms
  after.Add(11, SchedStat{9'000, 11'000'000, 9}, true);    // +10 ms
  after.Add(13, SchedStat{9'000, 8'000'000, 9}, false);    // started in the window: +8 ms
  after.Add(12, std::nullopt, false);                      // gone: left out, not incomplete
  const HostReady h = HostReadyBetween(before, after, 2.0);
  ASSERT_TRUE(h.measured);
  EXPECT_EQ(h.threads, 3u);
  EXPECT_EQ(h.run_queue_ns, 48'000'000u);
  EXPECT_DOUBLE_EQ(h.Pct(), 0.048 / (3 * 2.0) * 100);  // 0.8%
  // A counter that went backwards belongs to a new thread with a reused id: it counts from 0.
  SchedSnapshot reused;
  reused.Add(10, SchedStat{9'000, 2'000'000, 9}, true);
  EXPECT_EQ(HostReadyBetween(before, reused, 1.0).run_queue_ns, 2'000'000u);
}

TEST(HostReady, AnUnreadableWorkloadThreadMakesItNotAvailable) {
  SchedSnapshot before, after;
  before.Add(10, SchedStat{1, 1, 1}, true);
  after.Add(10, SchedStat{2, 100, 2}, true);
  EXPECT_TRUE(HostReadyBetween(before, after, 1.0).measured);
  SchedSnapshot broken = after;
  broken.Add(11, std::nullopt, /*required=*/true);  // no schedstat for a workload thread
  EXPECT_FALSE(broken.complete);
  for (const HostReady& h :
       {HostReadyBetween(before, broken, 1.0), HostReadyBetween(broken, after, 1.0),
        HostReadyBetween(before, SchedSnapshot{}, 1.0)}) {
    EXPECT_FALSE(h.measured);
    EXPECT_EQ(h.Pct(), -1);
  }
  EXPECT_EQ(HostReadyBetween(before, after, 0.0).Pct(), -1);  // no wall time: nothing to divide
}

}  // namespace
}  // namespace vstack::bench
