// The zstd layer's packer (blockdev/zstd/bin_packer.h): best fit among active bins and holes,
// the fullest retired or sealed first, and through the layer: a crafted stream of fragments
// needs fewer bins than arrival order would, and reads back.
#include "blockdev/zstd/bin_packer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/crash_workload.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

constexpr uint32_t kBin = 4096;

// Packs `sizes` in order the way the zstd queue does (a bin's writes complete at once here) and
// returns the number of bins opened.
uint32_t BinsFor(const std::vector<uint32_t>& sizes, uint32_t max_active, size_t max_holes) {
  BinPacker<int> p(kBin, max_active, max_holes, 1);
  std::vector<uint32_t> free_of;  // by handle (= bin number)
  auto activate = [&](int bin) {
    uint32_t free = 0;
    if (std::optional<int> retired = p.MakeRoom(&free)) (void)p.Retire(*retired, free);
    p.Activate(bin, free_of[bin]);
  };
  for (uint32_t s : sizes) {
    const auto c = p.Choose(s);
    int bin = c.active;
    if (c.kind == BinPacker<int>::Choice::kHole) {
      bin = static_cast<int>(c.hole.bin);
      EXPECT_EQ(c.hole.free, free_of[bin]);
      activate(bin);
    } else if (c.kind == BinPacker<int>::Choice::kNew) {
      bin = static_cast<int>(free_of.size());
      free_of.push_back(kBin);
      activate(bin);
    }
    bool full = false;
    const uint32_t offset = p.Place(bin, s, &full);
    EXPECT_EQ(offset, kBin - free_of[bin]);
    free_of[bin] -= s;
  }
  return static_cast<uint32_t>(free_of.size());
}

TEST(BinPacker, BestFitBeatsArrivalOrderOnACraftedStream) {
  // Three large fragments, then three small ones that each fit beside a large one.
  const std::vector<uint32_t> sizes = {3000, 3000, 3000, 1000, 1000, 1000};
  EXPECT_EQ(BinsFor(sizes, 1, 0), 4u);   // one open bin, arrival order: the old layer
  EXPECT_EQ(BinsFor(sizes, 1, 64), 3u);  // one active bin, the others kept as holes
  EXPECT_EQ(BinsFor(sizes, 4, 0), 3u);   // four active bins
}

TEST(BinPacker, ChoosesTheTightestBinAndRetiresTheFullestFirst) {
  BinPacker<int> p(kBin, 2, 1, 1);
  bool full = false;
  p.Activate(0, kBin);
  p.Activate(1, kBin);
  EXPECT_EQ(p.Place(0, 2596, &full), 0u);  // bin 0: 1500 free
  EXPECT_EQ(p.Place(1, 2996, &full), 0u);  // bin 1: 1100 free
  auto c = p.Choose(1000);
  ASSERT_EQ(c.kind, BinPacker<int>::Choice::kActive);
  EXPECT_EQ(c.active, 1);  // the tighter fit
  EXPECT_EQ(p.Choose(1200).active, 0);
  EXPECT_EQ(p.Choose(1600).kind, BinPacker<int>::Choice::kNew);
  uint32_t free = 0;
  EXPECT_EQ(p.MakeRoom(&free), 1);  // the fullest
  EXPECT_EQ(free, 1100u);
  EXPECT_FALSE(p.Retire(1, free).has_value());  // kept as a hole
  p.Activate(2, kBin);
  // The hole (1100 free) fits 1050 more tightly than bin 0 (1500) or bin 2 (4096).
  c = p.Choose(1050);
  ASSERT_EQ(c.kind, BinPacker<int>::Choice::kHole);
  EXPECT_EQ(c.hole.bin, 1u);
  EXPECT_EQ(c.hole.free, 1100u);
  // With the one hole slot taken, retiring another seals the fullest hole.
  EXPECT_FALSE(p.Retire(7, 900).has_value());
  const auto sealed = p.Retire(8, 2000);
  ASSERT_TRUE(sealed.has_value());
  EXPECT_EQ(sealed->bin, 7u);
  // A bin that can take no fragment is sealed when placed full.
  EXPECT_EQ(p.Place(0, 1500, &full), 2596u);
  EXPECT_TRUE(full);
  EXPECT_EQ(p.active_count(), 1u);
}

// `len` bytes that compress to about `len` (random), then zeros.
void FillGrain(unsigned char* p, uint32_t len, uint64_t seed) {
  WorkloadRng rng(seed);
  std::memset(p, 0, kBin);
  for (uint32_t i = 0; i < len; ++i) p[i] = static_cast<unsigned char>(rng.Next());
}

// Through the layer, with one active bin: the large fragments' bins become holes that the small
// ones fill (read back through tail reads: rule=packed leaves unaligned ends). Arrival order
// would take four bins.
TEST(BinPacker, TheLayerPacksACraftedStreamIntoThreeBins) {
  auto dev = Open("zstd:rule=packed,open_bins=1,size=1M+memory:4M");
  ASSERT_OK(dev);
  SyncIo io(**dev);
  const uint32_t lens[] = {2500, 2500, 2500, 1000, 1000, 1000};
  AlignedBuffer all(6 * kBin);
  for (int i = 0; i < 6; ++i) {
    unsigned char* g = reinterpret_cast<unsigned char*>(all.data()) + i * kBin;
    FillGrain(g, lens[i], i + 1);
    AlignedBuffer b(kBin);
    std::memcpy(b.data(), g, kBin);
    ASSERT_OK(io.Write(uint64_t(i) * kBin, b.span()));
  }
  const SpaceUsage s = *(*dev)->Space();
  EXPECT_EQ(s.physical_bytes_used, 3u * kBin);
  EXPECT_GT((*dev)->Stats().counter("tail_reads"), 0u);
  AlignedBuffer back(6 * kBin);
  ASSERT_OK(io.Read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), all.data(), 6 * kBin), 0);
  const CheckResult c = CheckStack(**dev);
  EXPECT_EQ(c.corruptions + c.leaks, 0u) << (c.messages.empty() ? "" : c.messages[0]);
}

}  // namespace
}  // namespace vstack::testing
