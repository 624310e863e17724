// The dedup layer: its engine on its own (claims, reference counts, copy-on-write reuse, the
// fingerprint index), then the device: accounting, identical writes racing from several threads,
// verify=on, reopen. (Generic block-device behaviour is in the conformance suite.)
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "blockdev/dedup/dedup_device.h"
#include "blockdev/dedup/dedup_engine.h"
#include "blockdev/dedup/fingerprint.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

using Claim = DedupEngine::Claim;

Fingerprint Fp(uint64_t n) { return Fingerprint{n * 0x9E3779B97F4A7C15ull + 1, n}; }

// A unique grain's whole write: claim, "write", finish. Returns the physical grain.
uint32_t WriteNew(DedupEngine& e, uint64_t v, const Fingerprint& fp) {
  auto r = e.ClaimWrite(v, false, fp, false, false);
  EXPECT_EQ(r.what, Claim::kWrite);
  e.FinishWrite(v, r.pgrain, fp, true);
  return r.pgrain;
}

void Commit(DedupEngine& e) { e.FinishCommit(e.TakeSnapshot(), true); }

TEST(DedupEngine, ZeroDuplicateAndUniqueGrains) {
  DedupEngine e(100, 50, nullptr);
  const uint32_t p = WriteNew(e, 0, Fp(1));
  EXPECT_EQ(e.ClaimWrite(1, false, Fp(1), false, false).what, Claim::kDone);  // shared
  EXPECT_EQ(e.ClaimWrite(2, true, {}, false, false).what, Claim::kDone);      // zero
  auto u = e.usage();
  EXPECT_EQ(u.live_grains, 3u);
  EXPECT_EQ(u.zero_grains, 1u);
  EXPECT_EQ(u.unique_grains, 1u);
  std::vector<uint32_t> m;
  e.MapEntries(0, 4, &m);
  EXPECT_EQ(m, (std::vector<uint32_t>{DedupEngine::kFirstGrain + p, DedupEngine::kFirstGrain + p,
                                      DedupEngine::kZero, DedupEngine::kUnmapped}));
  CheckResult c;
  e.Check(CheckMode::kReadOnly, &c);
  EXPECT_EQ(c.corruptions + c.leaks, 0u) << (c.messages.empty() ? "" : c.messages[0]);
}

TEST(DedupEngine, ReleasedGrainIsReusedOnlyAfterACommitThatCoversTheRelease) {
  DedupEngine e(10, 2, nullptr);
  const uint32_t a = WriteNew(e, 0, Fp(1));
  WriteNew(e, 1, Fp(2));
  EXPECT_EQ(e.ClaimWrite(2, false, Fp(3), false, false).what, Claim::kNoSpace);  // full
  // Overwriting v0 with zeros releases `a`, but the durable map may still point at it.
  ASSERT_EQ(e.ClaimWrite(0, true, {}, false, false).what, Claim::kDone);
  EXPECT_EQ(e.pending_frees(), 1u);
  EXPECT_EQ(e.ClaimWrite(2, false, Fp(3), false, false).what, Claim::kNoSpace);
  // A commit taken before another release does not free that one.
  DedupEngine::Snapshot s = e.TakeSnapshot();
  ASSERT_EQ(e.ClaimWrite(1, true, {}, false, false).what, Claim::kDone);  // releases grain 1 now
  e.FinishCommit(std::move(s), true);
  EXPECT_EQ(e.pending_frees(), 1u);  // grain 1 still waits for its own commit
  auto r = e.ClaimWrite(2, false, Fp(3), false, false);
  ASSERT_EQ(r.what, Claim::kWrite);
  EXPECT_EQ(r.pgrain, a);
  e.FinishWrite(2, r.pgrain, Fp(3), true);
  EXPECT_EQ(e.ClaimWrite(3, false, Fp(4), false, false).what, Claim::kNoSpace);
  Commit(e);
  EXPECT_EQ(e.ClaimWrite(3, false, Fp(4), false, false).what, Claim::kWrite);
}

TEST(DedupEngine, PinnedGrainWaitsForItsReader) {
  DedupEngine e(10, 1, nullptr);
  WriteNew(e, 0, Fp(1));
  std::vector<uint32_t> read;
  e.LookupForRead(0, 1, &read);  // a reader pins grain 0
  ASSERT_EQ(e.ClaimWrite(0, true, {}, false, false).what, Claim::kDone);
  Commit(e);
  EXPECT_EQ(e.ClaimWrite(1, false, Fp(2), false, false).what, Claim::kNoSpace);  // deferred
  e.Unpin(read[0] - DedupEngine::kFirstGrain);
  EXPECT_EQ(e.ClaimWrite(1, false, Fp(2), false, false).what, Claim::kWrite);
}

TEST(DedupEngine, IdenticalGrainInFlightMakesOthersWaitAndAFailedWriteLetsThemRetry) {
  DedupEngine e(10, 10, nullptr);
  auto first = e.ClaimWrite(0, false, Fp(7), false, false);
  ASSERT_EQ(first.what, Claim::kWrite);
  EXPECT_EQ(e.ClaimWrite(1, false, Fp(7), false, false).what, Claim::kBusy);
  EXPECT_EQ(e.ClaimWrite(0, false, Fp(8), false, false).what, Claim::kBusy);  // v0 is locked
  e.FinishWrite(0, first.pgrain, Fp(7), false);  // the write failed: grain and index entry go
  auto again = e.ClaimWrite(1, false, Fp(7), false, false);
  EXPECT_EQ(again.what, Claim::kWrite);
  e.FinishWrite(1, again.pgrain, Fp(7), true);
  EXPECT_EQ(e.ClaimWrite(2, false, Fp(7), false, false).what, Claim::kDone);
  EXPECT_EQ(e.usage().unique_grains, 1u);
}

TEST(DedupEngine, VerifyMismatchStoresAnUnindexedGrain) {
  DedupEngine e(10, 10, nullptr);
  const uint32_t p = WriteNew(e, 0, Fp(1));
  auto v = e.ClaimWrite(1, false, Fp(1), true, false);
  ASSERT_EQ(v.what, Claim::kVerify);
  EXPECT_EQ(v.pgrain, p);
  auto w = e.FinishVerify(1, p, Fp(1), /*equal=*/false);  // same fingerprint, other bytes
  ASSERT_EQ(w.what, Claim::kWrite);
  e.FinishWrite(1, w.pgrain, Fp(1), true);
  EXPECT_EQ(e.usage().unique_grains, 2u);
  EXPECT_EQ(e.usage().collisions, 1u);
  // The index still leads to the first grain.
  auto again = e.ClaimWrite(2, false, Fp(1), true, false);
  EXPECT_EQ(again.pgrain, p);
  EXPECT_EQ(e.FinishVerify(2, p, Fp(1), true).what, Claim::kDone);
  CheckResult c;
  e.Check(CheckMode::kReadOnly, &c);
  EXPECT_EQ(c.corruptions, 0u) << (c.messages.empty() ? "" : c.messages[0]);
}

TEST(DedupEngine, IndexSurvivesGrowthAndDeletionsAndStaysUnder32BytesPerUniqueGrain) {
  constexpr uint64_t kGrains = 200000;
  DedupEngine e(kGrains, kGrains, nullptr);
  for (uint64_t i = 0; i < kGrains; ++i) WriteNew(e, i, Fp(i));
  const DedupEngine::Usage u = e.usage();
  EXPECT_EQ(u.unique_grains, kGrains);
  const double per = double(u.index_memory_bytes) / double(u.unique_grains);
  RecordProperty("index_bytes_per_unique_grain", std::to_string(per));
  EXPECT_LE(per, 32.0);
  // Release every other grain, commit (frees them and erases their index entries), then every
  // remaining fingerprint must still be found (backward-shift deletion keeps probe chains).
  for (uint64_t i = 0; i < kGrains; i += 2) ASSERT_EQ(e.ClaimWrite(i, true, {}, false, false).what, Claim::kDone);
  Commit(e);
  for (uint64_t i = 1; i < kGrains; i += 2) {
    ASSERT_EQ(e.ClaimWrite(i, false, Fp(i), false, false).what, Claim::kDone) << i;
  }
  for (uint64_t i = 0; i < 1000; i += 2) {
    ASSERT_EQ(e.ClaimWrite(i, false, Fp(i), false, false).what, Claim::kWrite) << i;
  }
}

TEST(DedupEngine, CheckFindsStoredCountsThatDisagreeWithTheMap) {
  DedupEngine e(10, 10, nullptr);
  uint8_t map[4] = {DedupEngine::kFirstGrain + 3, 0, 0, 0};
  uint8_t grain[20] = {1, 2, 3};
  grain[16] = 5;  // stored refcount 5, but one map entry uses it
  ASSERT_OK(e.LoadEntry(DedupEngine::kMapTable, 0, map));
  ASSERT_OK(e.LoadEntry(DedupEngine::kGrainTable, 3, grain));
  grain[16] = 1;  // grain 4: stored refcount 1, no map entry (a lost grain)
  ASSERT_OK(e.LoadEntry(DedupEngine::kGrainTable, 4, grain));
  map[0] = 200;  // beyond the 10 physical grains
  EXPECT_FALSE(e.LoadEntry(DedupEngine::kMapTable, 1, map));
  e.FinishLoad();
  CheckResult c;
  e.Check(CheckMode::kReadOnly, &c);
  EXPECT_EQ(c.leaks, 2u);
  EXPECT_EQ(c.corruptions, 0u);
  ASSERT_EQ(c.messages.size(), 2u);
  EXPECT_EQ(c.messages[0], "Leaked dedup: physical grain 3: stored reference count 5 but 1 map "
                           "entry uses it");
  EXPECT_EQ(c.messages[1], "Leaked dedup: physical grain 4: stored reference count 1 but 0 map "
                           "entries use it (lost grain)");
  CheckResult repair;
  e.Check(CheckMode::kRepairLeaks, &repair);
  EXPECT_EQ(repair.repaired, 2u);
  CheckResult after;
  e.Check(CheckMode::kReadOnly, &after);
  EXPECT_EQ(after.leaks + after.corruptions, 0u);
}

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
