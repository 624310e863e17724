// The grain engine's shared state on its own (blockdev/grainmap/unit_map.h): copy-on-write reuse
// of units only after a commit captured their release, pins of readers, reference counts
// against the map, grain locks, consecutive units for one write; and dedup's fingerprint index
// (blockdev/dedup/dedup_index.h). The layers built on them are tested through their devices.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <thread>

#include "blockdev/dedup/dedup_index.h"
#include "blockdev/grainmap/unit_map.h"
#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

using E = UnitMap;

// A layer without a say in reuse.
void FreeAll(std::span<const uint64_t> units, const std::function<bool(uint64_t)>& free_if) {
  for (uint64_t u : units) free_if(u);
}

std::vector<uint64_t> CommitAndReclaim(UnitMap& m) {
  UnitMap::Capture c = m.TakeCapture();
  std::vector<uint64_t> freed;
  m.Reclaim(c, FreeAll, &freed);
  return freed;
}

void Remap(UnitMap& m, UnitMap::Journal& j, uint64_t v, uint64_t e) {
  std::lock_guard lock(j.mu);
  m.Remap(j, v, e, /*counted=*/false);
}

// Opening walks only the blocks of units a loaded entry referenced: an empty dedup over a
// blank device below of 16 TiB (4 Gi units) took 6.8 s to look at every reference count.
TEST(UnitMap, AfterLoadingTheWalksVisitOnlyTheUnitsReferenced) {
  constexpr uint64_t kUnits = uint64_t{1} << 20;
  UnitMap m(/*grains=*/4096, /*entry_bytes=*/4, kUnits);
  m.Load(0, UnitMap::EntryOf(5));
  m.Load(1, UnitMap::EntryOf(5000));
  m.Load(2, UnitMap::EntryOf(9000));
  m.Load(2, UnitMap::kZero);  // the journal sets it again: unit 9000 loses its reference
  m.FinishLoad();
  EXPECT_EQ(m.NextLoadedUnit(0), 0u);
  EXPECT_EQ(m.NextLoadedUnit(6), 6u);             // in unit 5's block
  EXPECT_EQ(m.NextLoadedUnit(1024), 4096u);       // unit 5000's block
  EXPECT_EQ(m.NextLoadedUnit(9 * 1024), kUnits);  // past unit 9000's block: none
  EXPECT_EQ(m.usage().used, 2u);  // 5 and 5000; 9000 is in a walked block but unreferenced
  EXPECT_EQ(m.refs(9000), 0u);
}

TEST(UnitMap, ReleasedUnitIsReusedOnlyAfterACommitThatCapturedTheRelease) {
  UnitMap m(10, 4, 2);
  m.FinishLoad();
  UnitMap::Journal* j = m.Attach();
  uint64_t a, b, c;
  ASSERT_TRUE(m.TakeUnit(*j, &a));
  ASSERT_TRUE(m.TakeUnit(*j, &b));
  Remap(m, *j, 0, E::EntryOf(a));
  Remap(m, *j, 1, E::EntryOf(b));
  EXPECT_FALSE(m.TakeUnit(*j, &c)) << "both units are used";
  Remap(m, *j, 0, E::kZero);  // releases a, but the durable map may still point at it
  EXPECT_FALSE(m.TakeUnit(*j, &c));
  UnitMap::Capture cut = m.TakeCapture();
  EXPECT_EQ(cut.grains, (std::vector<std::pair<uint64_t, uint64_t>>{{0, E::kZero},
                                                                    {1, E::EntryOf(b)}}));
  Remap(m, *j, 1, E::kUnmapped);  // releases b after the cut: not this commit's to free
  std::vector<uint64_t> freed;
  m.Reclaim(cut, FreeAll, &freed);
  EXPECT_EQ(freed, std::vector<uint64_t>{a});
  ASSERT_TRUE(m.TakeUnit(*j, &c));
  EXPECT_EQ(c, a);
  EXPECT_FALSE(m.TakeUnit(*j, &c)) << "b waits for the commit of its own release";
  EXPECT_EQ(CommitAndReclaim(m), std::vector<uint64_t>{b});
  EXPECT_TRUE(m.TakeUnit(*j, &c));
  m.Detach(j);
}

// A queue's journal goes when its queue does, unless it holds records for the next commit: a
// device that short-lived threads read kept one journal per thread that ever used it (about
// 1 KiB each, found through Python threads) until a commit, for ever if nothing was written.
// Dropping it keeps what it counted: usage is the same before and after.
TEST(UnitMap, AQueuesJournalGoesWithItUnlessItHoldsRecordsForTheNextCommit) {
  UnitMap m(10, 4, 4);
  m.FinishLoad();
  for (int i = 0; i < 1000; ++i) m.Detach(m.Attach());  // readers only
  EXPECT_EQ(m.journal_count(), 0u);

  UnitMap::Journal* writer = m.Attach();
  uint64_t u;
  ASSERT_TRUE(m.TakeUnit(*writer, &u));
  Remap(m, *writer, 3, E::EntryOf(u));
  const UnitMap::Usage before = m.usage();
  m.Detach(writer);
  EXPECT_EQ(m.journal_count(), 1u) << "its record of grain 3 went before a commit took it";
  UnitMap::Capture cut = m.TakeCapture();
  EXPECT_EQ(cut.grains, (std::vector<std::pair<uint64_t, uint64_t>>{{3, E::EntryOf(u)}}));
  EXPECT_EQ(m.journal_count(), 0u);

  UnitMap::Journal* again = m.Attach();  // records taken by a commit, then closed
  ASSERT_TRUE(m.TakeUnit(*again, &u));
  Remap(m, *again, 4, E::EntryOf(u));
  (void)m.TakeCapture();
  const UnitMap::Usage counted = m.usage();
  m.Detach(again);
  EXPECT_EQ(m.journal_count(), 0u);
  EXPECT_EQ(m.usage().live, counted.live) << "dropping the journal lost what it counted";
  EXPECT_EQ(m.usage().used, counted.used);
  EXPECT_GT(counted.live, before.live);
}

TEST(UnitMap, AReaderHoldsBackTheReuseOfWhatItMayHaveLookedUp) {
  UnitMap m(10, 8, 1);
  m.FinishLoad();
  UnitMap::Journal* j = m.Attach();
  UnitMap::Journal* reader = m.Attach();
  uint64_t a, b;
  ASSERT_TRUE(m.TakeUnit(*j, &a));
  Remap(m, *j, 0, E::EntryOf(a));
  const uint64_t gen = m.Enter(*reader);  // a reader on its way to `a`
  EXPECT_EQ(m.Get(0), E::EntryOf(a));
  Remap(m, *j, 0, E::kZero);
  EXPECT_TRUE(CommitAndReclaim(m).empty()) << "a unit a reader may read is not reused";
  EXPECT_FALSE(m.TakeUnit(*j, &b));
  const uint64_t later = m.Enter(*reader);  // a reader that came after: it cannot see `a`
  m.Leave(*reader, gen);
  EXPECT_EQ(CommitAndReclaim(m), std::vector<uint64_t>{a}) << "the next commit frees it";
  m.Leave(*reader, later);
  m.Detach(reader);
  m.Detach(j);
}

// Load counts as it goes (FinishLoad never walks the map): a journal replayed over a checkpoint
// sets an entry again, and only the last value holds a reference or counts as live or zero.
TEST(UnitMap, LoadCountsOnlyTheLastValueOfAnEntrySetTwice) {
  UnitMap m(1000, 8, 10);
  m.Load(0, E::EntryOf(3));
  m.Load(0, E::EntryOf(4));  // replayed: unit 3 loses the reference
  m.Load(1, E::kZero);
  m.Load(2, E::EntryOf(4));
  m.Load(2, E::kUnmapped);   // discarded later
  m.Load(999, E::kZero);
  m.Load(999, E::EntryOf(4));
  m.FinishLoad();
  EXPECT_EQ(m.refs(3), 0u);
  EXPECT_EQ(m.refs(4), 2u);
  const UnitMap::Usage u = m.usage();
  EXPECT_EQ(u.live, 3u);   // grains 0, 1, 999
  EXPECT_EQ(u.zeros, 1u);  // grain 1
  EXPECT_EQ(u.used, 1u);   // unit 4
  EXPECT_EQ(u.allocated, 1u);
  CheckResult c;
  m.Check(CheckMode::kReadOnly, "t: unit", &c);
  EXPECT_TRUE(c.messages.empty()) << c.messages[0];
}

// Walks of the map skip the blocks no entry was ever set in, and only those: a damaged entry at
// the far end of a 2^32-grain map is still found.
TEST(UnitMap, WalksSkipOnlyTheBlocksNeverWritten) {
  const uint64_t grains = uint64_t{1} << 32, block = UnitMap::kBlockGrains;
  UnitMap m(grains, 4, 16);
  EXPECT_EQ(m.NextWritten(0), grains);
  m.Load(5'000'000, E::EntryOf(1));
  m.Load(grains - 1, E::kZero);
  m.FinishLoad();
  EXPECT_EQ(m.NextWritten(0), 5'000'000 / block * block);
  EXPECT_EQ(m.NextWritten(5'000'001), 5'000'001u);  // within a written block: itself
  EXPECT_EQ(m.NextWritten(5'000'000 / block * block + block), (grains - 1) / block * block);
  EXPECT_EQ(m.NextWritten(grains - 1), grains - 1);
  EXPECT_EQ(m.NextWritten(grains), grains);
  m.Load(64 * block, E::kZero);  // a block at a word's first bit
  EXPECT_EQ(m.NextWritten(1), 64 * block);
  CheckResult clean;
  m.Check(CheckMode::kReadOnly, "t: unit", &clean);
  EXPECT_TRUE(clean.messages.empty()) << clean.messages[0];
  m.OverwriteUncounted(grains - 2, E::EntryOf(7));
  CheckResult c;
  m.Check(CheckMode::kReadOnly, "t: unit", &c);
  ASSERT_FALSE(c.messages.empty());
  EXPECT_EQ(c.messages[0], "ERROR t: unit 7: reference count 0 in memory but 1 map entry uses it");
}

TEST(UnitMap, CheckFindsReferencesTheMapDisagreesWithAndLostUnits) {
  UnitMap m(10, 8, 10);
  m.Load(0, E::EntryOf(3));
  m.Load(1, E::EntryOf(3));
  m.FinishLoad();
  EXPECT_EQ(m.refs(3), 2u);
  m.OverwriteUncounted(2, E::EntryOf(5));  // no reference, and free in the allocator
  UnitMap::Journal* j = m.Attach();
  uint64_t lost;
  ASSERT_TRUE(m.TakeUnit(*j, &lost));  // taken, never mapped
  CheckResult c;
  m.Check(CheckMode::kReadOnly, "t: unit", &c);
  EXPECT_EQ(c.leaks, 1u);
  EXPECT_EQ(c.corruptions, 2u);
  ASSERT_EQ(c.messages.size(), 3u);
  EXPECT_EQ(c.messages[0], "Leaked t: unit " + std::to_string(lost) + ": allocated but unused (lost)");
  EXPECT_EQ(c.messages[1], "ERROR t: unit 5: reference count 0 in memory but 1 map entry uses it");
  EXPECT_EQ(c.messages[2], "ERROR t: unit 5: used by the map but free in the allocator (doubly usable)");
  CheckResult repair;
  m.Check(CheckMode::kRepairLeaks, "t: unit", &repair);
  EXPECT_EQ(repair.repaired, 1u);
  CheckResult after;
  m.Check(CheckMode::kReadOnly, "t: unit", &after);
  EXPECT_EQ(after.leaks, 0u);
  m.Detach(j);
}

TEST(UnitMap, CheckCountsTheHoldsOfEveryQueue) {
  UnitMap m(10, 8, 10);
  m.FinishLoad();
  UnitMap::Journal* a = m.Attach();
  UnitMap::Journal* b = m.Attach();
  uint64_t bin;
  ASSERT_TRUE(m.TakeUnit(*a, &bin));
  // A bin being filled: referenced and allocated, but named by no map entry.
  m.Hold(*a, bin);
  m.Hold(*a, bin);
  m.Hold(*b, bin);
  EXPECT_EQ(m.refs(bin), 3u);
  CheckResult held;
  m.Check(CheckMode::kReadOnly, "t: unit", &held);
  EXPECT_EQ(held.corruptions + held.leaks, 0u) << (held.messages.empty() ? "" : held.messages[0]);
  m.Unhold(*a, bin);
  m.Unhold(*b, bin);
  CheckResult one;
  m.Check(CheckMode::kReadOnly, "t: unit", &one);
  EXPECT_EQ(one.corruptions + one.leaks, 0u) << (one.messages.empty() ? "" : one.messages[0]);
  m.Unhold(*a, bin);  // released: awaiting a commit, not lost
  CheckResult none;
  m.Check(CheckMode::kReadOnly, "t: unit", &none);
  EXPECT_EQ(none.corruptions + none.leaks, 0u) << (none.messages.empty() ? "" : none.messages[0]);
  m.Detach(b);
  m.Detach(a);
}

TEST(UnitMap, GrainLocksAreAllOrNothingAcrossWords) {
  UnitMap m(200, 4, 0);
  EXPECT_TRUE(m.TryLock(60, 10));  // bits in two words
  EXPECT_FALSE(m.TryLock(69, 2));
  EXPECT_TRUE(m.TryLock(70, 100));
  EXPECT_FALSE(m.TryLock(0, 61)) << "grain 60 is held";
  EXPECT_TRUE(m.TryLock(0, 60)) << "a failed try leaves nothing held";
  m.Unlock(60, 10);
  EXPECT_TRUE(m.TryLock(65, 1));
}

TEST(UnitMap, TheUnitsOfOneWriteAreConsecutive) {
  UnitMap m(1000, 4, 1000);
  m.FinishLoad();
  UnitMap::Journal* j = m.Attach();
  uint64_t u, prev = 0;
  for (int write = 0; write < 40; ++write) {
    m.Reserve(*j, 8);
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE(m.TakeUnit(*j, &u));
      if (i) {
        EXPECT_EQ(u, prev + 1) << "write " << write;
      }
      prev = u;
    }
  }
  m.Detach(j);
}

TEST(UnitMap, AReserveTakesSeveralShortRunsUnderOneLockOfTheAllocator) {
  // Free space in runs of two units, as random overwrites leave it: units 1-2, 4-5, 7-8, ...
  constexpr uint64_t kUnits = 300;
  UnitMap m(kUnits, 4, kUnits);
  m.FinishLoad();
  UnitMap::Journal* fill = m.Attach();
  for (uint64_t v = 0; v < kUnits; ++v) {
    uint64_t u;
    ASSERT_TRUE(m.TakeUnit(*fill, &u));
    Remap(m, *fill, v, E::EntryOf(u));
  }
  for (uint64_t v = 0; v < kUnits; ++v) {
    if (E::UnitOf(m.Get(v)) % 3 != 0) Remap(m, *fill, v, E::kUnmapped);
  }
  ASSERT_EQ(CommitAndReclaim(m).size(), 200u);
  m.Detach(fill);

  UnitMap::Journal* j = m.Attach();
  const uint64_t before = m.reserve_refills();
  m.Reserve(*j, 2);
  EXPECT_EQ(m.reserve_refills(), before + 1);
  EXPECT_EQ(m.usage().allocated, m.usage().used) << "reserved units are not allocated";
  CheckResult c;
  m.Check(CheckMode::kReadOnly, "t: unit", &c);
  EXPECT_EQ(c.leaks + c.corruptions, 0u) << (c.messages.empty() ? "" : c.messages[0]);
  // An eighth of the free units (25) in runs of two: 12 writes of two units from one refill.
  for (int write = 0; write < 12; ++write) {
    m.Reserve(*j, 2);
    uint64_t a, b;
    ASSERT_TRUE(m.TakeUnit(*j, &a));
    ASSERT_TRUE(m.TakeUnit(*j, &b));
    EXPECT_EQ(b, a + 1) << "write " << write;
  }
  EXPECT_EQ(m.reserve_refills(), before + 1) << "one lock of the allocator, not one per write";
  m.Detach(j);
  EXPECT_EQ(m.free_units(), 200u - 24u) << "a detached queue gives back every run it held";
}

// The reserves of idle queues come back to a queue short of units: a server's idle worker
// threads held most of a small device's free space in their reserves, and its writes failed
// with ENOSPC while that space was free. A queue in use keeps its reserve.
TEST(UnitMap, IdleQueuesReservesComeBackToAQueueShortOfUnits) {
  constexpr uint64_t kUnits = 1000;
  UnitMap m(kUnits, 4, kUnits);
  m.FinishLoad();
  std::vector<UnitMap::Journal*> idle;
  uint64_t reserved = 0;
  for (int i = 0; i < 12; ++i) {
    idle.push_back(m.Attach());
    m.Reserve(*idle.back(), 1);
    reserved += idle.back()->reserved();
  }
  ASSERT_GT(reserved, kUnits / 2) << "the idle queues hold most of the free units";
  UnitMap::Journal* in_use = idle.back();
  const uint64_t kept = in_use->reserved();
  UnitMap::Journal* busy = m.Attach();
  uint64_t taken = 0;
  {
    UnitMap::OwnerActivity other(*in_use);  // its thread is in the queue (here: this one)
    UnitMap::OwnerActivity self(*busy);
    uint64_t u;
    for (bool more = true; more;) {
      m.Reserve(*busy, 8);
      for (int i = 0; i < 8 && more; ++i) {
        more = m.TakeUnit(*busy, &u);
        taken += more;
      }
    }
  }
  EXPECT_EQ(in_use->reserved(), kept) << "a queue in use keeps its reserve";
  EXPECT_EQ(taken, kUnits - kept) << "every other unit, the idle queues' reserves included";
  for (UnitMap::Journal* j : idle) m.Detach(j);
  m.Detach(busy);
}

// Opens `n` queues on `dev` (each its own SyncIo), each writing one 4 KiB block from `at` on so
// that it holds a reserve of units, then left idle, as a server's worker threads are.
void OpenIdleQueues(BlockDevice& dev, int n, uint64_t at, Rng& rng,
                    std::vector<std::unique_ptr<SyncIo>>* idle) {
  for (int i = 0; i < n; ++i) {
    idle->push_back(std::make_unique<SyncIo>(dev));
    ASSERT_OK(idle->back()->Write(at + i * 4096, RandomBuffer(rng, 4096).span()));
  }
}

// The same through a device and its queues, as `vstack serve` drives it: a guest fills the
// layer, discards it, flushes and writes again while other queues sit idle with reserves.
TEST(GrainReserves, AWriteAfterADiscardFindsTheRoomIdleQueuesReserved) {
  for (const char* spec : {"dedup:size=32M,format=on+memory:8M", "zstd:size=32M,format=on+memory:8M"}) {
    auto dev = Open(spec);
    ASSERT_OK(dev);
    Rng rng(7);
    std::vector<std::unique_ptr<SyncIo>> idle;
    ASSERT_NO_FATAL_FAILURE(OpenIdleQueues(**dev, 12, 16 << 20, rng, &idle));
    SyncIo io(**dev);
    AlignedBuffer big = RandomBuffer(rng, 5 << 20);
    ASSERT_OK(io.Write(0, big.span())) << spec;
    ASSERT_OK(io.Discard(0, 32 << 20)) << spec;
    ASSERT_OK(io.Flush());
    AlignedBuffer again = RandomBuffer(rng, 5 << 20);
    ASSERT_OK(io.Write(0, again.span())) << spec << ": the room came back";
    AlignedBuffer back(5 << 20);
    ASSERT_OK(io.Read(0, back.span()));
    EXPECT_EQ(std::memcmp(back.data(), again.data(), back.size()), 0) << spec;
  }
}

// The take-back under contention: threads writing (each through its own queue) take back each
// other's reserves in the moments a thread is between requests, and the idle queues'; no write
// may fail and none may land on a unit another holds (each thread reads back its last data).
// Live data stays under the layer's capacity, so every ENOSPC would be a false one. Under
// ThreadSanitizer (tests/tsan) this is the race check of OwnerActivity's protocol.
TEST(GrainReserves, ThreadsWritingOnAFullLayerTakeBackEachOthersReserves) {
  for (const char* spec : {"dedup:size=32M,format=on+memory:8M", "zstd:size=32M,format=on+memory:8M"}) {
    auto dev = Open(spec);
    ASSERT_OK(dev);
    Rng seed_rng(11);
    std::vector<std::unique_ptr<SyncIo>> idle;
    ASSERT_NO_FATAL_FAILURE(OpenIdleQueues(**dev, 8, 24 << 20, seed_rng, &idle));
    constexpr int kThreads = 4;
    constexpr uint64_t kRegion = 1 << 20, kWrite = 64 << 10;  // 4 MiB live of about 6 MiB
    std::vector<std::thread> threads;
    std::vector<std::string> errors(kThreads);
    std::vector<AlignedBuffer> last(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        SyncIo io(**dev);
        Rng rng(100 + t);
        const uint64_t base = t * kRegion;
        last[t] = AlignedBuffer(kRegion);
        for (int round = 0; round < 24 && errors[t].empty(); ++round) {
          for (uint64_t off = 0; off < kRegion && errors[t].empty(); off += kWrite) {
            AlignedBuffer data = RandomBuffer(rng, kWrite);
            if (std::error_code ec = io.Write(base + off, data.span())) {
              errors[t] = "write at " + std::to_string(base + off) + ": " + ec.message();
            }
            std::memcpy(last[t].data() + off, data.data(), kWrite);
          }
          if (round % 8 == 7 && io.Flush()) errors[t] = "flush failed";
        }
        AlignedBuffer back(kRegion);
        if (errors[t].empty() && io.Read(base, back.span())) errors[t] = "read failed";
        if (errors[t].empty() && std::memcmp(back.data(), last[t].data(), kRegion) != 0) {
          errors[t] = "read back other data";
        }
      });
    }
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << spec << ", thread " << t;
  }
}

// ---------------------------------------------------------------------------------------------
// Dedup's fingerprint index

Fingerprint Fp(uint64_t n) { return Fingerprint{n * 0x9E3779B97F4A7C15ull + 1, n * 0xC2B2AE3D27D4EB4Full}; }

TEST(DedupIndex, APendingEntryNamesItsWriterUntilReady) {
  DedupIndex x(100, 100);
  const Fingerprint fp = Fp(7);
  auto lock = x.Lock(fp);
  x.Set(3, fp);
  x.Insert(fp, 3, /*owner=*/42);
  ASSERT_TRUE(x.Find(fp));
  EXPECT_EQ(x.Find(fp)->unit, 3u);
  EXPECT_EQ(x.Find(fp)->owner, 42u);
  x.Ready(3);
  EXPECT_EQ(x.Find(fp)->owner, 0u);
  // A duplicate kept unindexed (a collision under verify=on): erasing it leaves the indexed one.
  x.Set(5, fp);
  x.Erase(5);
  EXPECT_EQ(x.Find(fp)->unit, 3u);
  x.Erase(3);
  EXPECT_FALSE(x.Find(fp));
}

TEST(DedupIndex, SurvivesGrowthAndDeletionsAndStaysUnder32BytesPerUniqueGrain) {
  constexpr uint64_t kUnits = 200000;
  DedupIndex x(kUnits, kUnits);
  for (uint64_t u = 0; u < kUnits; ++u) {
    auto lock = x.Lock(Fp(u));
    x.Set(u, Fp(u));
    x.Insert(Fp(u), u, 0);
  }
  EXPECT_EQ(x.entries(), kUnits);
  const double per = double(x.memory_bytes()) / double(kUnits);
  RecordProperty("index_bytes_per_unique_grain", std::to_string(per));
  EXPECT_LE(per, 32.0);
  for (uint64_t u = 0; u < kUnits; u += 2) {
    auto lock = x.Lock(Fp(u));
    x.Erase(u);
  }
  for (uint64_t u = 0; u < kUnits; ++u) {
    auto lock = x.Lock(Fp(u));
    const auto hit = x.Find(Fp(u));
    ASSERT_EQ(hit.has_value(), u % 2 == 1) << u;
    if (hit) {
      ASSERT_EQ(hit->unit, u);
    }
  }
}

// A small dedup device over a large device below (dedup:size=1G over 16 TiB) sized its index
// for an eighth of the units below: 42 MB of slots here, 2.7 GB for 16 TiB, with nothing
// written. It holds at most one entry per virtual grain, and is now sized by the fewer.
TEST(DedupIndex, IsSizedByTheVirtualGrainsWhenTheyAreFewerThanTheUnits) {
  constexpr uint64_t kUnits = uint64_t{1} << 26, kGrains = uint64_t{1} << 18;
  DedupIndex x(kUnits, kGrains);
  // The fingerprints and owners are reserved per unit, but take memory only once written.
  EXPECT_LE(x.memory_bytes(), uint64_t{1} << 20) << "bytes of slots for " << kGrains;
  for (uint64_t u = 0; u < kGrains; ++u) {  // and it still holds them all
    auto lock = x.Lock(Fp(u));
    x.Set(u, Fp(u));
    x.Insert(Fp(u), u, 0);
  }
  EXPECT_EQ(x.entries(), kGrains);
}

}  // namespace
}  // namespace vstack::testing
