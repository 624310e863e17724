// The VHDX BAT in pages (formats/vhdx/bat_table.h): absent pages read as 0 and cost no page,
// the first non-zero entry allocates its page, and threads racing into the same absent pages
// allocate each page once and lose no entry (run under ThreadSanitizer too).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "formats/vhdx/bat_table.h"

namespace vstack::vhdx {
namespace {

constexpr uint64_t kPage = BatTable::kEntriesPerPage;

TEST(VhdxBatTable, AbsentPagesReadZeroAndAZeroAllocatesNone) {
  BatTable bat(10 * kPage + 7);  // a last page part full
  EXPECT_EQ(bat.size(), 10 * kPage + 7);
  EXPECT_EQ(bat.page_count(), 11u);
  EXPECT_EQ(bat.resident_pages(), 0u);
  EXPECT_EQ(bat.Get(0), 0u);
  EXPECT_EQ(bat.Get(10 * kPage + 6), 0u);
  bat.Set(3 * kPage + 1, 0);
  EXPECT_EQ(bat.resident_pages(), 0u) << "a 0 into an absent page leaves it absent";
  EXPECT_FALSE(bat.PageResident(3));
}

TEST(VhdxBatTable, AnEntryAllocatesItsPageAloneAndTheWalkSeesOnlyWhatIsSet) {
  BatTable bat(10 * kPage + 7);
  bat.Set(3 * kPage + 1, 0x100006);
  bat.Set(3 * kPage + 9, 0x200006);
  bat.Set(10 * kPage + 6, 2);
  EXPECT_EQ(bat.resident_pages(), 2u);
  EXPECT_TRUE(bat.PageResident(3));
  EXPECT_TRUE(bat.PageResident(10));
  EXPECT_FALSE(bat.PageResident(4));
  EXPECT_EQ(bat.Get(3 * kPage + 1), 0x100006u);
  EXPECT_EQ(bat.Get(3 * kPage + 2), 0u);
  bat.Set(3 * kPage + 9, 0);  // back to 0: the page stays
  EXPECT_EQ(bat.resident_pages(), 2u);
  std::vector<std::pair<uint64_t, uint64_t>> seen;
  bat.ForEachNonZero([&](uint64_t index, uint64_t e) { seen.push_back({index, e}); });
  const std::vector<std::pair<uint64_t, uint64_t>> want = {{3 * kPage + 1, 0x100006},
                                                           {10 * kPage + 6, 2}};
  EXPECT_EQ(seen, want);
  BatTable moved = std::move(bat);
  EXPECT_EQ(moved.Get(10 * kPage + 6), 2u);
  EXPECT_EQ(moved.resident_pages(), 2u);
}

TEST(VhdxBatTable, ThreadsSettingEntriesOfTheSameAbsentPagesAllocateEachOnce) {
  // Four threads set interleaved entries of the same 64 absent pages at once, while a fifth
  // reads them: every page is published once (the losers of each race free theirs), every
  // entry lands, and a reader sees 0 or the entry, never a torn page.
  constexpr uint64_t kPages = 64;
  constexpr int kThreads = 4;
  BatTable bat(kPages * kPage);
  auto value = [](uint64_t index) { return (index + 1) << 20 | 6; };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < kPage; i += kThreads) {
        for (uint64_t p = 0; p < kPages; ++p) bat.Set(p * kPage + i + t, value(p * kPage + i + t));
      }
    });
  }
  threads.emplace_back([&] {
    for (uint64_t index = 0; index < kPages * kPage; ++index) {
      const uint64_t e = bat.Get(index);
      ASSERT_TRUE(e == 0 || e == value(index)) << "entry " << index << ": " << e;
    }
  });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bat.resident_pages(), kPages);
  for (uint64_t index = 0; index < kPages * kPage; ++index) {
    ASSERT_EQ(bat.Get(index), value(index)) << "entry " << index;
  }
}

}  // namespace
}  // namespace vstack::vhdx
