// The memory backend's prefill option (memory:SIZE,prefill=on): every page allocated and
// touched at open, the data still reading as zeros, the device still fresh.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "blockdev/memory/memory_device.h"
#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"

namespace vstack {
namespace {

MemoryDevice& AsMemory(DevicePtr& dev) { return static_cast<MemoryDevice&>(*dev); }

TEST(MemoryPrefill, EveryPageIsResidentAndReadsAsZeros) {
  const uint64_t size = 32 << 20;
  const uint64_t rss_before = testing::ResidentBytes();
  auto dev = Open("memory:32M,prefill=on");
  ASSERT_OK(dev);
  // The pages are in memory now, not at their first write.
  EXPECT_GE(testing::ResidentBytes() - rss_before, size - size / 8);
  MemoryDevice& mem = AsMemory(*dev);
  EXPECT_TRUE(mem.prefilled());
  EXPECT_EQ(mem.resident_bytes(), size);
  EXPECT_TRUE(mem.fresh());  // zeros only: a layer above may format it
  EXPECT_NE(mem.Describe().find("prefilled"), std::string::npos) << mem.Describe();

  // Fully allocated, like a preallocated file: one data extent.
  std::vector<Extent> ext;
  ASSERT_OK(mem.MapExtents(0, size, &ext));
  ASSERT_EQ(ext.size(), 1u);
  EXPECT_EQ(ext[0], (Extent{0, size, 0}));

  SyncIo io(mem);
  AlignedBuffer b(1 << 20, 4096);
  std::memset(b.data(), 0xee, b.size());
  ASSERT_OK(io.Read(size - b.size(), b.span()));
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(std::to_integer<int>(b.data()[i]), 0) << i;

  std::memset(b.data(), 0x42, 4096);
  ASSERT_OK(io.Write(8192, b.span().first(4096)));
  EXPECT_FALSE(mem.fresh());
  EXPECT_EQ(mem.resident_bytes(), size);  // written in place: nothing new allocated
}

// Discarded pages leave the prefill mapping for the free list and come back from it; pages of
// the mapping are never freed one by one (AddressSanitizer would report it).
TEST(MemoryPrefill, DiscardedPagesAreReused) {
  auto dev = Open("memory:4M,prefill=on");
  ASSERT_OK(dev);
  MemoryDevice& mem = AsMemory(*dev);
  SyncIo io(mem);
  ASSERT_OK(io.Discard(0, 64 << 10));
  EXPECT_EQ(mem.resident_bytes(), (4u << 20) - (64u << 10));
  std::vector<Extent> ext;
  ASSERT_OK(mem.MapExtents(0, 128 << 10, &ext));
  ASSERT_EQ(ext.size(), 2u);
  EXPECT_EQ(ext[0], (Extent{0, 64 << 10, kExtentHole | kExtentZero}));

  AlignedBuffer b(64 << 10, 4096);
  std::memset(b.data(), 0x17, b.size());
  ASSERT_OK(io.Write(0, b.span()));
  EXPECT_EQ(mem.resident_bytes(), 4u << 20);
  AlignedBuffer back(64 << 10, 4096);
  ASSERT_OK(io.Read(0, back.span()));
  EXPECT_EQ(std::memcmp(b.data(), back.data(), b.size()), 0);
}

// A layer that formats only a fresh device formats a prefilled one without format=on.
TEST(MemoryPrefill, ALayerAboveFormatsIt) {
  auto dev = Open("dedup+memory:64M,prefill=on");
  ASSERT_OK(dev);
  testing::Rng rng(3);
  const AlignedBuffer data = testing::RandomBuffer(rng, 8192);
  AlignedBuffer back(8192, 4096);
  SyncIo io(**dev);
  ASSERT_OK(io.Write(0, data.span()));
  ASSERT_OK(io.Read(0, back.span()));
  EXPECT_EQ(std::memcmp(data.data(), back.data(), back.size()), 0);
}

TEST(MemoryPrefill, OffIsSparse) {
  auto dev = Open("memory:32M,prefill=off");
  ASSERT_OK(dev);
  EXPECT_FALSE(AsMemory(*dev).prefilled());
  EXPECT_EQ(AsMemory(*dev).resident_bytes(), 0u);
  auto dflt = Open("memory:32M");
  ASSERT_OK(dflt);
  EXPECT_FALSE(AsMemory(*dflt).prefilled());
}

TEST(MemoryPrefill, BadValuesAreRefusedWithWhatIsAccepted) {
  auto bad = Open("memory:1M,prefill=maybe");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("prefill"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("expected on or off, got 'maybe'"), std::string::npos)
      << bad.error().message;

  // More than the machine has: refused at open, with the figures, before any allocation.
  auto huge = Open("memory:1P,prefill=on");
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().message.find("prefill=on needs 1 PiB of RAM"), std::string::npos)
      << huge.error().message;
  EXPECT_NE(huge.error().message.find("prefill=off"), std::string::npos) << huge.error().message;
}

}  // namespace
}  // namespace vstack
