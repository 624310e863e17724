// The crc32c layer: silent corruption below it is caught on read and named, never returned;
// regions left dirty by a crash are recomputed; readers racing writers of the same grains never
// see a false mismatch.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>

#include "blockdev/crc32c/crc32c_device.h"
#include "lib/iovec.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

uint64_t PropertyU64(BlockDevice& d, const std::string& key) {
  PropertyList props;
  d.Properties(props);
  for (const Property& p : props) {
    if (p.key == key) return std::get<uint64_t>(p.value);
  }
  ADD_FAILURE() << "no property " << key;
  return 0;
}

void FlipByte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c ^= 0x20;
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

// Creates a 16 MiB crc32c image at `path` holding `data` from offset 0, and gives the file
// offset of its data area (where grain 0 is stored).
void NewImageHolding(const std::string& path, const AlignedBuffer& data, uint64_t* data_offset) {
  auto dev = Open("crc32c+file:" + path + ",create=on,size=16M");
  ASSERT_OK(dev);
  *data_offset = static_cast<Crc32cDevice&>(**dev).data_offset();
  SyncIo io(**dev);
  ASSERT_OK(io.Write(0, data.span()));
}

TEST(Crc32cDevice, CorruptionBelowIsCaughtNamedAndNeverReturned) {
  TempDir dir;
  const std::string path = dir.File("d.img");
  Rng rng(1);
  AlignedBuffer data = RandomBuffer(rng, 1 << 20);
  uint64_t data_offset = 0;
  ASSERT_NO_FATAL_FAILURE(NewImageHolding(path, data, &data_offset));
  const uint64_t bad = 5 * 4096 + 100;  // a byte of grain 5
  FlipByte(path, data_offset + bad);
  auto dev = Open("crc32c+file:" + path);
  ASSERT_OK(dev);
  SyncIo io(**dev);
  AlignedBuffer back(1 << 20);
  std::memset(back.data(), 0x77, back.size());
  EXPECT_EQ(io.Read(0, back.span()), make_error_code(Errc::kChecksumMismatch));
  EXPECT_TRUE(IsZero(back.data(), back.size()));  // no bad data goes up
  EXPECT_EQ(PropertyU64(**dev, "checksum_mismatches"), 1u);
  EXPECT_EQ(PropertyU64(**dev, "last_mismatch_offset"), 5u * 4096);
  EXPECT_EQ((*dev)->Stats().counter("checksum_errors"), 1u);
  // The grains around it read fine.
  ASSERT_OK(io.Read(0, back.span().first(5 * 4096)));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), 5 * 4096), 0);
  ASSERT_OK(io.Read(6 * 4096, back.span().first(4096)));
  // A partial write into the bad grain would give the damage a valid checksum: refused.
  EXPECT_EQ(io.Write(5 * 4096, back.span().first(512)), make_error_code(Errc::kChecksumMismatch));
  // Check names it.
  CheckResult c;
  ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &c));
  ASSERT_EQ(c.corruptions, 1u);
  EXPECT_NE(c.messages[0].find("checksum mismatch in the grain at offset 20480"), std::string::npos)
      << c.messages[0];
  // Rewriting the whole grain heals it.
  ASSERT_OK(io.Write(5 * 4096, data.span().subspan(5 * 4096, 4096)));
  ASSERT_OK(io.Read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
}

// check -r all accepts a mismatched grain's data (its checksum recomputed): the check then
// reports it as repaired, not as an error, and the image checks clean afterwards (it said
// "1 error(s) found" and exited 2 after a successful repair).
TEST(Crc32cDevice, RepairAllReportsTheAcceptedMismatchAsRepaired) {
  TempDir dir;
  const std::string path = dir.File("d.img");
  Rng rng(2);
  AlignedBuffer data = RandomBuffer(rng, 1 << 20);
  uint64_t data_offset = 0;
  ASSERT_NO_FATAL_FAILURE(NewImageHolding(path, data, &data_offset));
  FlipByte(path, data_offset + 3 * 4096 + 7);
  {
    auto dev = Open("crc32c+file:" + path, OpenOptions{.for_check = true});
    ASSERT_OK(dev);
    CheckResult c;
    ASSERT_OK((*dev)->Check(CheckMode::kRepairAll, &c));
    EXPECT_EQ(c.corruptions, 0u);
    EXPECT_EQ(c.repaired, 1u);
    ASSERT_EQ(c.messages.size(), 1u);
    EXPECT_TRUE(c.messages[0].starts_with("Repaired: crc32c: checksum mismatch in the grain at "
                                          "offset 12288"))
        << c.messages[0];
  }
  auto dev = Open("crc32c+file:" + path, OpenOptions{.read_only = true});
  ASSERT_OK(dev);
  CheckResult again;
  ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &again));
  EXPECT_EQ(again.corruptions, 0u);
}

// A check lists the first 100 damaged grains and counts the rest in one line (the engine's
// scrub, for every grain layer); -r all accepts them all, listed or not, and persists them.
TEST(Crc32cDevice, ACheckListsTheFirstHundredFindingsAndCountsTheRest) {
  TempDir dir;
  const std::string path = dir.File("d.img");
  Rng rng(4);
  AlignedBuffer data = RandomBuffer(rng, 1 << 20);
  uint64_t data_offset = 0;
  ASSERT_NO_FATAL_FAILURE(NewImageHolding(path, data, &data_offset));
  for (uint64_t g = 0; g < 130; ++g) FlipByte(path, data_offset + g * 4096 + 9);
  auto check = [&](CheckMode mode) {
    auto dev = Open("crc32c+file:" + path,
                    OpenOptions{.read_only = mode == CheckMode::kReadOnly, .for_check = true});
    EXPECT_OK(dev);
    CheckResult c;
    if (dev) {
      EXPECT_OK((*dev)->Check(mode, &c));
    }
    return c;
  };
  CheckResult found = check(CheckMode::kReadOnly);
  EXPECT_EQ(found.corruptions, 130u);
  ASSERT_EQ(found.messages.size(), 101u);
  EXPECT_TRUE(found.messages[99].starts_with("ERROR crc32c: checksum mismatch"))
      << found.messages[99];
  EXPECT_EQ(found.messages.back(),
            "ERROR crc32c: 30 more stored grains fail their check (not listed)");
  CheckResult repaired = check(CheckMode::kRepairAll);
  EXPECT_EQ(repaired.corruptions, 0u);
  EXPECT_EQ(repaired.repaired, 130u);
  ASSERT_EQ(repaired.messages.size(), 101u);
  EXPECT_EQ(repaired.messages.back(), "Repaired: crc32c: 30 more stored grains (not listed)");
  CheckResult after = check(CheckMode::kReadOnly);
  EXPECT_EQ(after.corruptions, 0u);
  EXPECT_TRUE(after.messages.empty());
}

TEST(Crc32cDevice, DirtyRegionsAreRecomputedAfterACrash) {
  TempDir dir;
  const std::string path = dir.File("d.img"), copy = dir.File("copy.img");
  Rng rng(2);
  AlignedBuffer data = RandomBuffer(rng, 1 << 20);
  auto dev = Open("crc32c+file:" + path + ",create=on,size=16M");
  ASSERT_OK(dev);
  {
    SyncIo io(**dev);
    ASSERT_OK(io.Write(0, data.span()));
    ASSERT_OK(io.Flush());
  }
  EXPECT_GE(PropertyU64(**dev, "dirty_regions"), 1u);
  // The file as a crash now would leave it: regions dirty, checksums not on disk.
  {
    std::ifstream in(path, std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
  }
  auto again = Open("crc32c+file:" + copy);
  ASSERT_OK(again);
  EXPECT_GE(PropertyU64(**again, "recovered_regions"), 1u);
  EXPECT_EQ(PropertyU64(**again, "dirty_regions"), 0u);
  SyncIo io(**again);
  AlignedBuffer back(1 << 20);
  ASSERT_OK(io.Read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
}

// A dirty-flag page that fails its checksum: torn by a crash, each flag is that of one write or
// the other, and both are safe, so only the regions it marks dirty are recomputed (all of them
// were, and with them any damage in their data was accepted as good: a flipped flag byte hid a
// damaged grain elsewhere). A page no tear explains is damage: reported, and -r all rewrites it.
TEST(Crc32cDevice, ATornDirtyFlagPageRecomputesOnlyTheRegionsItMarksDirty) {
  TempDir dir;
  const std::string path = dir.File("d.img");
  Rng rng(3);
  AlignedBuffer data = RandomBuffer(rng, 16 << 20);
  uint64_t data_offset = 0, flags_at = 0;
  const uint64_t region = uint64_t{Crc32cDevice::kPerRegion} * 4096;
  {
    auto dev = Open("crc32c+file:" + path + ",create=on,size=16M");
    ASSERT_OK(dev);
    data_offset = static_cast<Crc32cDevice&>(**dev).data_offset();
    flags_at = PropertyU64(**dev, "dirty_table_offset") + 8;  // past the page header
    ASSERT_OK(SyncIo(**dev).Write(0, data.span().first((*dev)->geometry().size_bytes)));
    ASSERT_OK((*dev)->Close());
  }
  FlipByte(path, data_offset + 5 * 4096 + 1);           // damage in region 0
  FlipByte(path, data_offset + 2 * region + 4096 + 1);  // and in region 2
  std::fstream(path, std::ios::in | std::ios::out | std::ios::binary)
      .seekp(static_cast<std::streamoff>(flags_at + 2))
      .put(1);  // region 2 dirty, as a write the crash cut would have left it
  {
    auto dev = Open("crc32c+file:" + path, OpenOptions{.read_only = true, .for_check = true});
    ASSERT_OK(dev);
    EXPECT_EQ(PropertyU64(**dev, "recovered_regions"), 1u);
    SyncIo io(**dev);
    AlignedBuffer back(4096);
    EXPECT_EQ(io.Read(5 * 4096, back.span()), make_error_code(Errc::kChecksumMismatch))
        << "damage in a region the torn page marks clean was accepted";
    CheckResult c;
    ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &c));
    EXPECT_EQ(c.corruptions, 1u);  // grain 5; region 2's damage is beyond detection now
    ASSERT_FALSE(c.messages.empty());
    EXPECT_NE(c.messages[0].find("failed its checksum (a crash tore its write, or it is "
                                 "damaged): its flags were taken as read, and the 1 region they "
                                 "mark dirty had its checksums recomputed"),
              std::string::npos)
        << c.messages[0];
    EXPECT_NE(c.messages[0].find("(virtual bytes " + std::to_string(2 * region) + " to " +
                                 std::to_string(3 * region) + ")"),
              std::string::npos)
        << c.messages[0];
  }
  std::fstream(path, std::ios::in | std::ios::out | std::ios::binary)
      .seekp(static_cast<std::streamoff>(flags_at + 1))
      .put(7);  // no write ever stores a flag of 7: damage
  {
    auto dev = Open("crc32c+file:" + path, OpenOptions{.read_only = true, .for_check = true});
    ASSERT_OK(dev);
    CheckResult c;
    ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &c));
    ASSERT_FALSE(c.messages.empty());
    EXPECT_TRUE(c.messages[0].starts_with("ERROR crc32c: dirty-flag page 0 at offset "))
        << c.messages[0];
    EXPECT_NE(c.messages[0].find("is damaged (no torn write looks like it): all 4 regions it "
                                 "covers were taken as dirty"),
              std::string::npos)
        << c.messages[0];
  }
  {
    auto dev = Open("crc32c+file:" + path, OpenOptions{.for_check = true});
    ASSERT_OK(dev);
    CheckResult c;
    ASSERT_OK((*dev)->Check(CheckMode::kRepairAll, &c));
    ASSERT_FALSE(c.messages.empty());
    EXPECT_TRUE(c.messages[0].starts_with("Repaired: crc32c: dirty-flag page 0")) << c.messages[0];
    EXPECT_EQ(c.corruptions, 0u);
  }
  auto dev = Open("crc32c+file:" + path, OpenOptions{.read_only = true});
  ASSERT_OK(dev);
  EXPECT_EQ(PropertyU64(**dev, "torn_pages"), 0u) << "the repair did not rewrite the page";
}

// Writers keep rewriting 16 grains with alternating patterns while readers read them: the
// readers must never see a checksum error (a write landing between a read and its check is
// retried), and every grain they see is one of the patterns.
TEST(Crc32cDevice, ReadersRacingWritersNeverSeeFalseMismatches) {
  auto dev = Open("crc32c+memory:16M");
  ASSERT_OK(dev);
  constexpr int kGrains = 16;
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0}, torn{0};
  auto writer = [&] {
    auto q = (*dev)->OpenQueue();
    AlignedBuffer b(kGrains * 4096);
    for (int i = 0; i < 300 && !stop; ++i) {
      std::memset(b.data(), 'a' + i % 3, b.size());
      iovec v = b.iov();
      IoRequest r;
      r.op = Op::kWrite;
      r.offset = 0;
      r.length = b.size();
      r.iov = &v;
      r.iovcnt = 1;
      if (std::error_code ec = Execute(**q, r)) {
        if (errors++ == 0) ADD_FAILURE() << "write: " << ec.message();
      }
    }
    stop = true;
  };
  auto reader = [&] {
    auto q = (*dev)->OpenQueue();
    AlignedBuffer b(kGrains * 4096);
    while (!stop) {
      iovec v = b.iov();
      IoRequest r;
      r.op = Op::kRead;
      r.offset = 0;
      r.length = b.size();
      r.iov = &v;
      r.iovcnt = 1;
      if (std::error_code ec = Execute(**q, r)) {
        if (errors++ == 0) ADD_FAILURE() << "read: " << ec.message();
        continue;
      }
      for (int g = 0; g < kGrains; ++g) {
        const char c = static_cast<char>(b.data()[g * 4096]);
        if (c != 0 && (c < 'a' || c > 'c')) ++torn;
      }
    }
  };
  std::thread w(writer), r1(reader), r2(reader);
  w.join();
  r1.join();
  r2.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ((*dev)->Stats().counter("checksum_errors"), 0u);
}

}  // namespace
}  // namespace vstack::testing
