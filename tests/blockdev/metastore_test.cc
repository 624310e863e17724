// The metadata toolkit of the transform layers on its own: superblock slots, table pages,
// journal commits, replay and checkpoints, the bitmap allocator, copy-on-write reclaiming.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "blockdev/metastore/crc32c.h"
#include "blockdev/memory/memory_device.h"
#include "blockdev/metastore/bitmap_allocator.h"
#include "blockdev/metastore/meta_store.h"
#include "blockdev/metastore/table_page.h"
#include "lib/endian.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

TEST(Crc32c, StandardCheckValueAndChaining) {
  const char* s = "123456789";
  EXPECT_EQ(Crc32c(s, 9), 0xE3069283u);
  EXPECT_EQ(Crc32cExtend(Crc32c(s, 4), s + 4, 5), 0xE3069283u);
  std::vector<unsigned char> zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
  char a[5] = {'1', '2', '3', '4', '5'}, b[4] = {'6', '7', '8', '9'};
  iovec iov[2] = {{a, 5}, {b, 4}};
  EXPECT_EQ(Crc32cIov(iov, 2, 0, 9), 0xE3069283u);
  EXPECT_EQ(Crc32cIov(iov, 2, 3, 6), Crc32c("456789", 6));
}

TEST(Superblock, EncodeDecodeRoundTripAndErrors) {
  Superblock sb = MetaStore::Plan("VSTEST01", {TableDesc{0, 1000, 4}, TableDesc{0, 77, 20}},
                                  1 << 20, {1, 2, 3});
  sb.volume_id = 0x1234;
  sb.generation = 9;
  std::vector<uint8_t> slot = EncodeSuperblock(sb);
  auto back = DecodeSuperblock(slot.data(), "VSTEST01", 0, "t");
  ASSERT_OK(back);
  EXPECT_EQ(back->generation, 9u);
  EXPECT_EQ(back->volume_id, 0x1234u);
  EXPECT_EQ(back->tables.size(), 2u);
  EXPECT_EQ(back->tables[1].entries, 77u);
  EXPECT_EQ(back->payload, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(back->data_offset % (1 << 20), 0u);
  EXPECT_OK(ValidateLayout(*back, back->data_offset, "t"));
  EXPECT_FALSE(ValidateLayout(*back, back->data_offset - 4096, "t"));
  auto wrong = DecodeSuperblock(slot.data(), "VSOTHER1", 0, "t");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("bad magic"), std::string::npos);
  slot[2000] ^= 1;
  auto bad = DecodeSuperblock(slot.data(), "VSTEST01", 4096, "t");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message.find("t: superblock at offset 4096: checksum mismatch"), 0u)
      << bad.error().message;
}

TEST(TablePage, BlankIsValidSealedValidatesAndPositionMatters) {
  std::vector<uint8_t> page(kMetaPageSize, 0);
  EXPECT_OK(CheckTablePage(page.data(), 5, 0, 3, 0, "t"));
  page[100] = 7;
  EXPECT_FALSE(CheckTablePage(page.data(), 5, 0, 3, 0, "t"));
  SealTablePage(page.data(), 5, 0, 3);
  EXPECT_OK(CheckTablePage(page.data(), 5, 0, 3, 0, "t"));
  EXPECT_FALSE(CheckTablePage(page.data(), 5, 0, 4, 0, "t"));  // another page number
  EXPECT_FALSE(CheckTablePage(page.data(), 5, 1, 3, 0, "t"));  // another table
  EXPECT_FALSE(CheckTablePage(page.data(), 6, 0, 3, 0, "t"));  // another volume
  EXPECT_EQ(TablePageCapacity(4), 1022u);
  EXPECT_EQ(TablePageCapacity(20), 204u);
  EXPECT_EQ(TablePageCapacity(0), 0u);
}

// A MetaStore on a memory device, with the state its records describe kept in a std::map.
class MetaStoreTest : public ::testing::Test {
 protected:
  using State = std::map<std::pair<uint32_t, uint64_t>, uint32_t>;

  Superblock Planned() {
    return MetaStore::Plan("VSTEST01", {TableDesc{0, 100000, 4}, TableDesc{0, 5000, 4}},
                           16 * kMetaPageSize, {});
  }
  void SetU32(MetaStore& s, uint32_t t, uint64_t i, uint32_t v) {
    uint8_t b[4];
    StoreLE32(b, v);
    s.Set(t, i, b);
    if (v) {
      want_[{t, i}] = v;
    } else {
      want_.erase({t, i});
    }
  }
  Status Commit(MetaStore& s) {
    auto lock = s.LockCommits();
    MetaBatch b = s.TakePending();
    return s.Commit(&b);
  }
  // Loads what is on `dev` into a map.
  Result<State> LoadAll(BlockDevice& dev, MetaStore::Counters* counters = nullptr) {
    SyncIo io(dev);
    VSTACK_ASSIGN_OR_RETURN(Superblock sb, ReadSuperblock(io, "VSTEST01", "t"));
    VSTACK_ASSIGN_OR_RETURN(auto store, MetaStore::Attach(dev, sb, true, "t"));
    State got;
    VSTACK_RETURN_IF_ERROR(store->Load([&](uint32_t t, uint64_t i, const uint8_t* e) -> Status {
      const uint32_t v = LoadLE32(e);
      if (v) {
        got[{t, i}] = v;
      } else {
        got.erase({t, i});
      }
      return OkStatus();
    }));
    if (counters) *counters = store->counters();
    auto lock = store->LockCommits();
    VSTACK_RETURN_IF_ERROR(store->Close());
    return got;
  }
  State want_;
};

TEST_F(MetaStoreTest, CommitsReplayAndCheckpointsAgreeWithTheModel) {
  DevicePtr dev = MakeDevice<MemoryDevice>(8 << 20, 512);
  auto store = MetaStore::Format(*dev, Planned(), "t");
  ASSERT_OK(store);
  Rng rng(3);
  // Enough groups to fill the 64 KiB journal several times over: checkpoints in between.
  for (int round = 0; round < 40; ++round) {
    for (int g = 0; g < 300; ++g) {
      SetU32(**store, 0, rng.Below(100000), static_cast<uint32_t>(rng.Below(5)));
      SetU32(**store, 1, rng.Below(5000), static_cast<uint32_t>(rng.Next()));
      (*store)->EndGroup();
    }
    ASSERT_OK(Commit(**store));
    if (round % 9 == 4) {
      // What is on disk now (journal + tables) is exactly the model.
      auto got = LoadAll(*dev);
      ASSERT_OK(got);
      ASSERT_EQ(*got, want_) << "round " << round;
    }
  }
  auto lock = (*store)->LockCommits();
  EXPECT_GE((*store)->counters().checkpoints, 3u);
  EXPECT_GE((*store)->counters().transactions, 40u);
  ASSERT_OK((*store)->Close());
  MetaStore::Counters c;
  auto got = LoadAll(*dev, &c);
  ASSERT_OK(got);
  EXPECT_EQ(*got, want_);
  EXPECT_EQ(c.replayed_transactions, 0u);  // Close checkpointed everything
}

TEST_F(MetaStoreTest, FailedCommitKeepsItsRecordsForTheNext) {
  DevicePtr dev = MakeDevice<MemoryDevice>(8 << 20, 512);
  auto store = MetaStore::Format(*dev, Planned(), "t");
  ASSERT_OK(store);
  SetU32(**store, 0, 5, 55);
  (*store)->EndGroup();
  MetaBatch b = (*store)->TakePending();
  SetU32(**store, 0, 6, 66);  // recorded while the first commit is "failing"
  (*store)->EndGroup();
  (*store)->RestorePending(std::move(b));
  MetaBatch all = (*store)->TakePending();
  EXPECT_EQ(all.group_ends.size(), 2u);
  {
    auto lock = (*store)->LockCommits();
    ASSERT_OK((*store)->Commit(&all));
    EXPECT_TRUE(all.empty());
  }
  auto got = LoadAll(*dev);
  ASSERT_OK(got);
  EXPECT_EQ(*got, want_);
}

// Issue 11 item 9: a checkpoint overwrites table pages in place, and a power loss may tear
// such a write at any 512-byte sector. The journal still holds every entry the checkpoint
// changed (its superblock did not land), so the load rebuilds the page; a bad page the journal
// does not cover is still corruption.
TEST_F(MetaStoreTest, ACheckpointPageTornAtAnySectorIsRebuiltFromTheJournal) {
  DevicePtr dev = MakeDevice<MemoryDevice>(8 << 20, 512);
  auto store = MetaStore::Format(*dev, Planned(), "t");
  ASSERT_OK(store);
  Rng rng(4);
  for (int g = 0; g < 200; ++g) {  // entries spread over many pages of table 0
    SetU32(**store, 0, rng.Below(100000), static_cast<uint32_t>(1 + rng.Below(1000)));
    (*store)->EndGroup();
  }
  ASSERT_OK(Commit(**store));
  const std::vector<unsigned char> before = ReadAll(*dev);
  {
    auto lock = (*store)->LockCommits();
    ASSERT_OK((*store)->Checkpoint());
  }
  const std::vector<unsigned char> after = ReadAll(*dev);
  const uint64_t table0 = (*store)->superblock().tables[0].offset;
  // The first table page the checkpoint rewrote.
  uint64_t page = table0;
  while (std::memcmp(&before[page], &after[page], kMetaPageSize) == 0) page += kMetaPageSize;
  ASSERT_LT(page, (*store)->superblock().data_offset);
  for (uint64_t sectors = 1; sectors < kMetaPageSize / 512; ++sectors) {
    // The checkpoint's superblock never landed; this page landed up to `sectors` sectors.
    std::vector<unsigned char> torn = before;
    std::memcpy(&torn[page], &after[page], sectors * 512);
    DevicePtr crashed = MemoryWithImage(torn);
    auto got = LoadAll(*crashed);
    ASSERT_OK(got) << sectors << " sectors";
    EXPECT_EQ(*got, want_) << sectors << " sectors";
  }
  // Damage to a page that no journaled entry touches is corruption, as before.
  std::vector<unsigned char> rotten = before;
  uint64_t quiet = table0;
  while (quiet == page || std::memcmp(&before[quiet], &after[quiet], kMetaPageSize) != 0) {
    quiet += kMetaPageSize;
  }
  std::memcpy(&rotten[quiet], &after[page], kMetaPageSize);  // a valid page at the wrong place
  DevicePtr crashed = MemoryWithImage(rotten);
  auto got = LoadAll(*crashed);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, make_error_code(Errc::kCorruption)) << got.error().message;
}

TEST(BitmapAllocator, NextFitRunsWrapAndReuse) {
  BitmapAllocator a(130);
  uint64_t n = 0;
  auto first = a.AllocateRun(10, &n);
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, 0u);
  EXPECT_EQ(n, 10u);
  EXPECT_EQ(*a.Allocate(), 10u);  // next fit: after the last allocation
  a.Free(3);
  EXPECT_EQ(*a.Allocate(), 3u);  // a freed (stale) unit is reused first
  a.Free(5);
  a.Free(4);
  EXPECT_EQ(*a.Allocate(), 4u);  // the most recently freed first
  EXPECT_EQ(*a.Allocate(), 5u);
  EXPECT_EQ(a.stale(), 0u);
  for (uint64_t i = 11; i < 130; ++i) EXPECT_EQ(*a.Allocate(), i);  // then next fit again
  EXPECT_FALSE(a.Allocate());
  EXPECT_EQ(a.used(), 130u);
  a.Free(129);
  EXPECT_EQ(*a.AllocateRun(5, &n), 129u);
  EXPECT_EQ(n, 1u);  // runs stop at the end
}

// Discarding: only units that stayed free for a whole round are taken (unless few are stale),
// and a taken unit cannot be allocated until its discard is done.
TEST(BitmapAllocator, AgedStaleUnitsAreTakenForDiscardAndNotAllocatedMeanwhile) {
  BitmapAllocator a(8);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(a.Allocate());
  a.Free(1);
  a.Free(2);
  std::vector<uint64_t> out;
  a.TakeAged(&out);  // end of the round in which 1 and 2 were freed: not aged yet
  EXPECT_TRUE(out.empty());
  a.Free(6);
  EXPECT_EQ(*a.Allocate(), 6u);  // reused, so it never needs a discard
  a.Free(5);
  a.TakeAged(&out, /*keep=*/8);  // 1 and 2 are aged, but at most 8 are stale: kept
  EXPECT_TRUE(out.empty());
  a.TakeAged(&out);  // now 1, 2 (carried) and 5 are aged
  EXPECT_EQ(out, (std::vector<uint64_t>{1, 2, 5}));
  EXPECT_EQ(a.stale(), 0u);
  EXPECT_FALSE(a.Allocate()) << "a unit being discarded was handed out";
  a.FreeDiscarded({1, 2});
  EXPECT_EQ(a.stale(), 0u);  // discarded units are clean
  EXPECT_EQ(*a.Allocate(), 1u);
  a.Free(7);
  a.Free(0);
  out.clear();
  a.TakeStale(&out);  // everything stale, at once (close, or to make room below)
  EXPECT_EQ(out, (std::vector<uint64_t>{0, 7}));
  EXPECT_EQ(*a.Allocate(), 2u);
  EXPECT_FALSE(a.Allocate());
}

// Between closes only runs of aged units are discarded; lone units stay stale (reused first,
// or discarded by TakeStale).
TEST(BitmapAllocator, AgedUnitsInShortRunsStayForReuse) {
  BitmapAllocator a(16);
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(a.Allocate());
  for (uint64_t u : {1, 4, 5, 6, 7, 10}) a.Free(u);
  std::vector<uint64_t> out;
  a.TakeAged(&out, /*keep=*/0, /*min_run=*/3);  // freed this round: not aged yet
  EXPECT_TRUE(out.empty());
  a.TakeAged(&out, /*keep=*/0, /*min_run=*/3);
  EXPECT_EQ(out, (std::vector<uint64_t>{4, 5, 6, 7})) << "only the run of 4 is discarded";
  EXPECT_EQ(a.stale(), 2u);  // 1 and 10 stay stale
  a.TakeAged(&out, /*keep=*/0, /*min_run=*/3);
  EXPECT_EQ(out.size(), 4u) << "a short run left stale is not offered again every round";
  out.clear();
  a.TakeStale(&out);
  EXPECT_EQ(out, (std::vector<uint64_t>{1, 10}));
}

// The units of one write: the free run around the most recently freed unit if it is long
// enough (extended backwards too, so a pair freed together is reused together), else the next
// clean run that is; a lone freed unit waits for a write of one grain.
TEST(BitmapAllocator, RunsForAWriteReuseFreedRunsWholeAndPassOverLoneUnits) {
  BitmapAllocator a(64);
  uint64_t n = 0;
  ASSERT_EQ(*a.AllocateRun(1, 32, &n), 0u);
  EXPECT_EQ(n, 32u);
  a.Free(10);
  a.Free(11);  // a pair, 11 on top
  a.Free(20);  // a lone unit, on top
  EXPECT_EQ(*a.AllocateRun(2, 8, &n), 32u) << "a lone freed unit is too short for two";
  EXPECT_EQ(n, 8u);
  EXPECT_EQ(*a.AllocateRun(1, 8, &n), 20u);  // it serves a single unit
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(*a.AllocateRun(2, 8, &n), 10u) << "the pair, found from its top unit";
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(a.stale(), 0u);
}

}  // namespace
}  // namespace vstack::testing
