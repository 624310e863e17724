// The dedup layer: fingerprints, then the device: accounting, identical writes racing from
// several threads, verify=on, reopen. (The engine's map and the fingerprint index are tested on
// their own in grain_engine_test.cc; generic block-device behaviour in the conformance suite.)
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "blockdev/dedup/dedup_device.h"
#include "blockdev/dedup/fingerprint.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

TEST(Fingerprint, IovecsHashLikeContiguousBytesAndZeroTest) {
  std::vector<unsigned char> data(8192);
  Rng rng(1);
  rng.Fill(data.data(), data.size());
  iovec iov[3] = {{data.data(), 1000}, {data.data() + 1000, 3000}, {data.data() + 4000, 4192}};
  EXPECT_EQ(FingerprintIov(iov, 3, 512, 4096), FingerprintOf(data.data() + 512, 4096));
  EXPECT_EQ(FingerprintIov(iov, 3, 4096, 4096), FingerprintOf(data.data() + 4096, 4096));
  EXPECT_FALSE(IsZeroIov(iov, 3, 0, 8192));
  std::vector<unsigned char> zeros(4096, 0);
  iovec z[2] = {{zeros.data(), 100}, {zeros.data() + 100, 3996}};
  EXPECT_TRUE(IsZeroIov(z, 2, 0, 4096));
}

// ---------------------------------------------------------------------------------------------
// The device

std::vector<unsigned char> PatternGrains(const std::vector<int>& ids) {
  std::vector<unsigned char> out(ids.size() * 4096, 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) continue;  // a zero grain
    Rng rng(ids[i] + 1);
    rng.Fill(&out[i * 4096], 4096);
  }
  return out;
}

SpaceUsage SpaceOf(BlockDevice& d) {
  auto s = d.Space();
  EXPECT_TRUE(s.has_value());
  return s ? *s : SpaceUsage{};
}

TEST(DedupDevice, AccountingSurvivesReopen) {
  TempDir dir;
  const std::string path = dir.File("d.img");
  std::vector<int> ids;
  for (int i = 0; i < 64; ++i) ids.push_back(i % 8 == 7 ? -1 : i % 12);  // 12 patterns, 8 zeros
  const auto data = PatternGrains(ids);
  {
    auto dev = Open("dedup+file:" + path + ",create=on,size=32M");
    ASSERT_OK(dev);
    SyncIo io(**dev);
    AlignedBuffer b(data.size());
    std::memcpy(b.data(), data.data(), data.size());
    ASSERT_OK(io.Write(1 << 20, b.span()));
    ASSERT_OK(io.WriteZeroes(4 << 20, 64 * 4096));  // zero grains, not unmapped
    const SpaceUsage s = SpaceOf(**dev);
    EXPECT_EQ(s.logical_bytes_written, data.size() + 64 * 4096);
    EXPECT_EQ(s.unique_grains, 12u);
    EXPECT_EQ(s.zero_grains, 8u + 64u);
    EXPECT_EQ(s.logical_bytes_live, 128u * 4096);
    EXPECT_EQ(s.physical_bytes_used, 12u * 4096);
    std::vector<Extent> ext;
    ASSERT_OK((*dev)->MapExtents(4 << 20, 8192, &ext));
    EXPECT_EQ(ext, (std::vector<Extent>{{4 << 20, 8192, kExtentZero}}));
    ext.clear();
    ASSERT_OK((*dev)->MapExtents(0, 4096, &ext));
    EXPECT_EQ(ext, (std::vector<Extent>{{0, 4096, kExtentHole | kExtentZero}}));
  }
  auto dev = Open("dedup+file:" + path);
  ASSERT_OK(dev);
  const SpaceUsage s = SpaceOf(**dev);
  EXPECT_EQ(s.unique_grains, 12u);
  EXPECT_EQ(s.zero_grains, 72u);
  SyncIo io(**dev);
  AlignedBuffer b(data.size());
  ASSERT_OK(io.Read(1 << 20, b.span()));
  EXPECT_EQ(std::memcmp(b.data(), data.data(), data.size()), 0);
  const CheckResult c = CheckStack(**dev);
  EXPECT_EQ(c.corruptions + c.leaks, 0u) << (c.messages.empty() ? "" : c.messages[0]);
}

// A thin 1 TiB dedup with two writes far apart: its map, its check and its scrub walk what
// was written (the map's blocks never written are skipped whole), and see both writes.
TEST(DedupDevice, MapAndCheckOfAHugeThinDeviceSeeWhatWasWritten) {
  constexpr uint64_t kTiB = uint64_t{1} << 40;
  auto dev = Open("dedup:size=1T+memory:2G");
  ASSERT_OK(dev);
  SyncIo io(**dev);
  Rng rng(3);
  AlignedBuffer a = RandomBuffer(rng, 8192), b = RandomBuffer(rng, 4096);
  ASSERT_OK(io.Write(0, a.span()));
  ASSERT_OK(io.Write(kTiB - 4096, b.span()));
  ASSERT_OK(io.Flush());
  std::vector<Extent> ext;
  ASSERT_OK((*dev)->MapExtents(0, kTiB, &ext));
  EXPECT_EQ(ext, (std::vector<Extent>{{0, 8192, 0},
                                      {8192, kTiB - 8192 - 4096, kExtentHole | kExtentZero},
                                      {kTiB - 4096, 4096, 0}}));
  const CheckResult c = CheckStack(**dev);
  EXPECT_EQ(c.corruptions + c.leaks, 0u) << (c.messages.empty() ? "" : c.messages[0]);
  // The scrub reads the far grain too: damaged below, it is named with its virtual offset.
  SyncIo below(*(*dev)->lower());
  AlignedBuffer chunk(64 << 20);
  uint64_t at = 0;
  bool found = false;
  for (uint64_t base = 0; !found && base < (uint64_t{2} << 30); base += chunk.size()) {
    ASSERT_OK(below.Read(base, chunk.span()));
    for (uint64_t o = 0; !found && o < chunk.size(); o += 4096) {
      found = std::memcmp(chunk.data() + o, b.data(), 4096) == 0;
      at = base + o;
    }
  }
  ASSERT_TRUE(found) << "the far grain is stored below";
  AlignedBuffer damaged_grain(4096);
  std::memcpy(damaged_grain.data(), b.data(), 4096);
  damaged_grain.data()[100] ^= std::byte{1};
  ASSERT_OK(below.Write(at, damaged_grain.span()));
  const CheckResult damaged = CheckStack(**dev);
  ASSERT_EQ(damaged.corruptions, 1u);
  EXPECT_NE(damaged.messages[0].find("virtual offset " + std::to_string(kTiB - 4096)),
            std::string::npos)
      << damaged.messages[0];
}

// Four threads, each with its own queue and 16 writes in flight, write the same 64 grains of
// data to their own regions at the same time: every identical grain must end up stored once.
TEST(DedupDevice, IdenticalWritesRacingFromManyThreadsAreStoredOnce) {
  for (const char* spec : {"dedup+memory:64M", "dedup:verify=on+memory:64M"}) {
    auto dev = Open(spec);
    ASSERT_OK(dev);
    std::vector<int> ids;
    for (int i = 0; i < 64; ++i) ids.push_back(i);
    const auto data = PatternGrains(ids);
    std::atomic<int> failures{0};
    auto worker = [&](int t) {
      auto q = (*dev)->OpenQueue();
      if (!q) return (void)++failures;
      AlignedBuffer b(data.size());
      std::memcpy(b.data(), data.data(), data.size());
      for (int round = 0; round < 4; ++round) {
        std::vector<IoRequest> reqs(16);
        std::vector<iovec> iov(16);
        for (int i = 0; i < 16; ++i) {
          iov[i] = iovec{b.data() + i * 4 * 4096, 4 * 4096};
          reqs[i].op = Op::kWrite;
          reqs[i].offset = (uint64_t(t) * 4 + round) * data.size() + i * 4 * 4096;
          reqs[i].length = 4 * 4096;
          reqs[i].iov = &iov[i];
          reqs[i].iovcnt = 1;
        }
        RunBatch(**q, reqs);
        for (auto& r : reqs) failures += r.status ? 1 : 0;
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    const SpaceUsage s = SpaceOf(**dev);
    EXPECT_EQ(s.unique_grains, 64u) << spec;
    EXPECT_EQ(s.logical_bytes_live, 16u * data.size()) << spec;
    SyncIo io(**dev);
    AlignedBuffer back(data.size());
    for (int k = 0; k < 16; ++k) {
      ASSERT_OK(io.Read(k * data.size(), back.span()));
      ASSERT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0) << spec << " copy " << k;
    }
    const CheckResult c = CheckStack(**dev);
    EXPECT_EQ(c.corruptions + c.leaks, 0u) << (c.messages.empty() ? "" : c.messages[0]);
    LayerStats st = (*dev)->Stats();
    if (std::string(spec).find("verify") != std::string::npos) {
      EXPECT_GT(st.counter("verify_reads"), 0u);
    }
  }
}

// Partial-grain writes to the same grain from several threads at once must all land (each
// read-modify-write holds the grain).
TEST(DedupDevice, ConcurrentPartialWritesToOneGrainAllLand) {
  auto dev = Open("dedup:grain=64K+memory:64M");
  ASSERT_OK(dev);
  std::atomic<int> failures{0};
  auto worker = [&](int t) {
    auto q = (*dev)->OpenQueue();
    if (!q) return (void)++failures;
    for (int i = 0; i < 32; ++i) {
      // Thread t owns 512-byte blocks t, t+4, t+8, ... of the first 64 KiB grain.
      const uint64_t block = uint64_t(t) + 4 * (i % 32);
      AlignedBuffer b(512);
      std::memset(b.data(), 0x10 * (t + 1) + (i % 16), 512);
      iovec v = b.iov();
      IoRequest r;
      r.op = Op::kWrite;
      r.offset = block * 512;
      r.length = 512;
      r.iov = &v;
      r.iovcnt = 1;
      if (Execute(**q, r)) ++failures;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  SyncIo io(**dev);
  AlignedBuffer b(65536);
  ASSERT_OK(io.Read(0, b.span()));
  for (int block = 0; block < 128; ++block) {
    const int t = block % 4, i = block / 4;
    const unsigned char want = static_cast<unsigned char>(0x10 * (t + 1) + (i % 16));
    EXPECT_EQ(static_cast<unsigned char>(b.data()[block * 512]), want) << "block " << block;
  }
}

}  // namespace
}  // namespace vstack::testing
