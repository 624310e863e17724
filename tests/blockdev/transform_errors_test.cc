// Bad things happening to the transform layers (dedup, zstd, crc32c): the device below runs out
// of space, the layer runs out of space, metadata is corrupt, options are wrong. Each must give
// a clear error, and lose nothing that was flushed.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "blockdev/dedup/dedup_device.h"
#include "blockdev/metastore/superblock.h"
#include "blockdev/metastore/table_page.h"
#include "lib/endian.h"
#include "lib/iovec.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/crash_workload.h"
#include "tests/testing/fault_device.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

std::vector<unsigned char> Pattern(uint64_t seed, size_t len) {
  std::vector<unsigned char> v(len);
  WorkloadRng rng(seed);
  FillMixed(rng, v.data(), len);
  return v;
}

std::error_code WriteAt(SyncIo& io, uint64_t off, const std::vector<unsigned char>& data) {
  AlignedBuffer b(data.size());
  std::memcpy(b.data(), data.data(), data.size());
  return io.Write(off, b.span());
}

std::vector<unsigned char> ReadAt(SyncIo& io, uint64_t off, size_t len, std::error_code* ec = nullptr) {
  AlignedBuffer b(len);
  std::error_code e = io.Read(off, b.span());
  if (ec) *ec = e;
  auto* p = reinterpret_cast<unsigned char*>(b.data());
  return std::vector<unsigned char>(p, p + len);
}

// Bytes of a file, and writing them back.
std::vector<unsigned char> Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(f), {});
}
void Spit(const std::string& path, const std::vector<unsigned char>& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// ---------------------------------------------------------------------------------------------
// ENOSPC below the layer

class NoSpaceBelow : public ::testing::TestWithParam<std::string> {};

TEST_P(NoSpaceBelow, SurfacesEnospcAndKeepsFlushedData) {
  TempDir dir;
  const std::string path = dir.File("d.img");
  const auto a = Pattern(1, 1 << 20);
  {
    auto file = Open("file:" + path + ",create=on,size=40M");
    ASSERT_OK(file);
    auto* fault = new FaultDevice(std::move(*file));
    auto dev = OpenLayersOn(GetParam(), DevicePtr(fault));
    ASSERT_OK(dev);
    {
      SyncIo io(**dev);
      ASSERT_OK(WriteAt(io, 0, a));
      ASSERT_OK(io.Flush());
      fault->ArmNoSpace(256 << 10);
      std::error_code ec;
      for (int i = 0; i < 64 && !ec; ++i) {
        std::vector<unsigned char> more(256 << 10);
        Rng rng(100 + i);
        rng.Fill(more.data(), more.size());  // incompressible and unique
        ec = WriteAt(io, (4 << 20) + i * more.size(), more);
        if (!ec) ec = io.Flush();
      }
      EXPECT_EQ(ec, std::errc::no_space_on_device) << ec.message();
      EXPECT_GT(fault->failed_writes(), 0u);
      // Reads still work and flushed data is intact in the running stack.
      std::error_code rec;
      EXPECT_EQ(ReadAt(io, 0, a.size(), &rec), a);
      EXPECT_OK(rec);
      fault->Disarm();
    }
    EXPECT_OK((*dev)->Close());
  }
  auto dev = OpenImage(GetParam() + "+file:" + path);
  ASSERT_OK(dev);
  SyncIo io(**dev);
  EXPECT_EQ(ReadAt(io, 0, a.size()), a);
  const CheckResult check = CheckStack(**dev);
  EXPECT_EQ(check.corruptions, 0u) << (check.messages.empty() ? "" : check.messages[0]);
}

INSTANTIATE_TEST_SUITE_P(Layers, NoSpaceBelow,
                         ::testing::Values("dedup:size=16M", "zstd:size=16M", "crc32c",
                                           "dedup:size=16M+zstd"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n;
                           for (char c : i.param) n += std::isalnum(c) ? c : '_';
                           return n;
                         });

// ---------------------------------------------------------------------------------------------
// The layer's own space

class OwnSpace : public ::testing::TestWithParam<std::string> {};

TEST_P(OwnSpace, FullLayerSaysNoSpaceAndFreedSpaceIsReused) {
  // A thin 16 MiB device over 6 MiB: unique data runs out of physical space.
  auto dev = Open(GetParam() + "+memory:6M");
  ASSERT_OK(dev);
  SyncIo io(**dev);
  const auto a = Pattern(7, 256 << 10);
  ASSERT_OK(WriteAt(io, 0, a));
  ASSERT_OK(io.Flush());
  std::error_code ec;
  uint64_t off = 1 << 20;
  for (; off < (16 << 20) && !ec; off += 256 << 10) {
    std::vector<unsigned char> more(256 << 10);
    Rng rng(off);
    rng.Fill(more.data(), more.size());
    ec = WriteAt(io, off, more);
  }
  EXPECT_EQ(ec, make_error_code(Errc::kNoSpace)) << ec.message();
  EXPECT_EQ(ReadAt(io, 0, a.size()), a);
  // Discard everything but `a`; after a flush the space is free again and new data fits.
  ASSERT_OK(io.Discard(1 << 20, (16 << 20) - (1 << 20)));
  ASSERT_OK(io.Flush());
  for (uint64_t o = 1 << 20; o + (256 << 10) <= off - (512 << 10); o += 256 << 10) {
    std::vector<unsigned char> more(256 << 10);
    Rng rng(o + 1);
    rng.Fill(more.data(), more.size());
    ASSERT_OK(WriteAt(io, o, more)) << "at " << o;
  }
  EXPECT_EQ(ReadAt(io, 0, a.size()), a);
}

INSTANTIATE_TEST_SUITE_P(Layers, OwnSpace, ::testing::Values("dedup:size=16M", "zstd:size=16M"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param.substr(0, i.param.find(':'));
                         });

// Without a flush, space released by overwrites is reused too: the layer commits by itself.
TEST(OwnSpace, OverwritesWithoutFlushReuseSpace) {
  auto dev = Open("dedup:size=4M+memory:4M");
  ASSERT_OK(dev);
  SyncIo io(**dev);
  for (int round = 0; round < 8; ++round) {
    std::vector<unsigned char> data(1 << 20);
    Rng rng(round);
    rng.Fill(data.data(), data.size());
    ASSERT_OK(WriteAt(io, 0, data)) << "round " << round;
    EXPECT_EQ(ReadAt(io, 0, data.size()), data);
  }
}

// ---------------------------------------------------------------------------------------------
// Corrupt metadata gives a clear error at open

struct CorruptCase {
  std::string layers;
  std::string magic;
};

class CorruptMetadata : public ::testing::TestWithParam<CorruptCase> {
 protected:
  void SetUp() override {
    path_ = dir_.File("d.img");
    auto dev = Open(GetParam().layers + "+file:" + path_ + ",create=on,size=24M");
    ASSERT_OK(dev);
    SyncIo io(**dev);
    ASSERT_OK(WriteAt(io, 0, Pattern(3, 512 << 10)));
    ASSERT_OK(io.Flush());
  }
  Result<DevicePtr> Reopen() { return Open(GetParam().layers + "+file:" + path_); }
  Superblock ReadSb() {
    auto file = Open("file:" + path_);
    EXPECT_TRUE(file.has_value());
    SyncIo io(**file);
    auto sb = ReadSuperblock(io, GetParam().magic, "test");
    EXPECT_TRUE(sb.has_value());
    return sb ? *sb : Superblock{};
  }
  TempDir dir_;
  std::string path_;
};

TEST_P(CorruptMetadata, OneBadSuperblockSlotIsSurvivedBothAreNot) {
  auto img = Slurp(path_);
  img[100] ^= 0xFF;  // slot A
  Spit(path_, img);
  ASSERT_OK(Reopen());
  img = Slurp(path_);
  img[100] ^= 0x01;
  img[4096 + 100] ^= 0x01;  // and slot B
  Spit(path_, img);
  auto dev = Reopen();
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message.find("superblock at offset 0: checksum mismatch"), std::string::npos)
      << dev.error().message;
  EXPECT_NE(dev.error().message.find("superblock at offset 4096"), std::string::npos)
      << dev.error().message;
}

// A superblock that says its grain is 0 (sealed with a valid checksum, in both slots: the
// newer generation wins) is inconsistent geometry, not a division by zero (it crashed the
// open with SIGFPE).
TEST_P(CorruptMetadata, AGrainOfZeroIsInconsistentGeometry) {
  {
    auto file = Open("file:" + path_);
    ASSERT_OK(file);
    SyncIo io(**file);
    auto sb = ReadSuperblock(io, GetParam().magic, "test");
    ASSERT_OK(sb);
    ASSERT_GE(sb->payload.size(), 8u);
    StoreLE32(sb->payload.data() + 4, 0);  // [u32 version][u32 grain]...
    ++sb->generation;
    ASSERT_OK(WriteSuperblock(io, *sb, "test"));
  }
  auto dev = Reopen();
  ASSERT_FALSE(dev);
  EXPECT_EQ(dev.error().code, make_error_code(Errc::kCorruption)) << dev.error().message;
  EXPECT_NE(dev.error().message.find("grain 0"), std::string::npos) << dev.error().message;
}

TEST_P(CorruptMetadata, BadTablePageNamesTableAndOffset) {
  const Superblock sb = ReadSb();  // after the clean close in SetUp the tables are written
  auto img = Slurp(path_);
  const uint64_t page = sb.tables[0].offset;
  ASSERT_FALSE(IsZero(&img[page], kMetaPageSize));
  img[page + 200] ^= 0x40;
  Spit(path_, img);
  auto dev = Reopen();
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message.find("metadata table 0 page 0 at offset " + std::to_string(page) +
                                     ": checksum mismatch"),
            std::string::npos)
      << dev.error().message;
}

TEST_P(CorruptMetadata, NonsenseBehindAValidChecksumIsRejected) {
  const Superblock sb = ReadSb();
  auto img = Slurp(path_);
  uint8_t* page = &img[sb.tables[0].offset];
  // The first map entry (or checksum) becomes all ones, sealed with a valid checksum.
  std::memset(page + kTablePageHeader, 0xFF, sb.tables[0].entry_size);
  SealTablePage(page, sb.volume_id, 0, 0);
  Spit(path_, img);
  auto dev = Reopen();
  if (GetParam().magic == "VSCRC32C") {
    // A wrong checksum is not structural: the open succeeds and the read fails, naming it.
    ASSERT_OK(dev);
    SyncIo io(**dev);
    std::error_code ec;
    ReadAt(io, 0, 4096, &ec);
    EXPECT_EQ(ec, make_error_code(Errc::kChecksumMismatch));
    CheckResult check;
    ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &check));
    ASSERT_GE(check.corruptions, 1u);
    EXPECT_NE(check.messages[0].find("checksum mismatch in the grain at offset 0"), std::string::npos)
        << check.messages[0];
    return;
  }
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message.find("map entry of virtual grain 0"), std::string::npos)
      << dev.error().message;
}

// An image cut short (a copy that stopped, a truncate) whose superblock is valid says it looks
// truncated and names both sizes, whether the cut is in the metadata or in the data area. Cut
// to 4 KiB (slot A alone) it said "holds no dedup superblock but other data", cut to 8 MiB
// "inconsistent geometry".
TEST_P(CorruptMetadata, ATruncatedImageSaysItLooksTruncated) {
  const std::string name = GetParam().layers;
  const uint64_t data_offset = ReadSb().data_offset;  // the metadata ends there, the data later
  ASSERT_LT(data_offset, uint64_t{8} << 20);
  for (uint64_t size : {uint64_t{4096}, data_offset - 4096, uint64_t{8} << 20}) {
    SCOPED_TRACE(size);
    const std::string copy = dir_.File("cut.img");
    std::filesystem::copy_file(path_, copy, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(copy, size);
    for (bool read_only : {false, true}) {
      auto dev = Open(name + "+file:" + copy, OpenOptions{.read_only = read_only});
      ASSERT_FALSE(dev);
      EXPECT_EQ(dev.error().code, make_error_code(Errc::kCorruption)) << dev.error().message;
      EXPECT_NE(dev.error().message.find(name + ": the device below (file " + copy),
                std::string::npos)
          << dev.error().message;
      const std::string says =
          "looks truncated: its " + name + " superblock says it held at least ";
      const size_t at = dev.error().message.find(says);
      ASSERT_NE(at, std::string::npos) << dev.error().message;
      // Where its data area ended: near the 24 MiB it had, wherever it was cut.
      const uint64_t held = std::stoull(dev.error().message.substr(at + says.size()));
      EXPECT_GT(held, uint64_t{20} << 20) << dev.error().message;
      EXPECT_LE(held, uint64_t{24} << 20) << dev.error().message;
      EXPECT_NE(dev.error().message.find("it has " + std::to_string(size) + " ("),
                std::string::npos)
          << dev.error().message;
    }
    EXPECT_EQ(std::filesystem::file_size(copy), size) << "a refused open changed the file";
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, CorruptMetadata,
                         ::testing::Values(CorruptCase{"dedup", "VSDEDUP1"},
                                           CorruptCase{"zstd", "VSZSTD01"},
                                           CorruptCase{"crc32c", "VSCRC32C"}),
                         [](const ::testing::TestParamInfo<CorruptCase>& i) {
                           return i.param.layers;
                         });

// A superblock slot that does not decode (torn by a crash during its write, or damaged) was
// never mentioned: check said "No errors were found", and when it was the newer slot, the open
// replayed the older one's journal, which later transactions had overwritten, and blamed the
// journal (then it failed, naming the superblock). Now check notes it (not corruption: a crash
// can leave one), a repair rewrites it, and a damaged newer slot is rebuilt from the older one
// and the journal: the journal restarts at its beginning only after a checkpoint's superblock
// is durable, so its first transaction says where replay starts, and every flushed write reads
// back.
TEST(CorruptSuperblock, ADamagedSlotIsNotedRepairedAndRebuiltWhenItsJournalWasReused) {
  TempDir dir;
  const std::string path = dir.File("d.img"), crash = dir.File("crash.img");
  const std::string copy = dir.File("copy.img");
  {
    auto dev = Open("dedup+file:" + path + ",create=on,size=24M");
    ASSERT_OK(dev);
    {
      SyncIo io(**dev);
      for (int i = 0; i < 400; ++i) {
        ASSERT_OK(WriteAt(io, uint64_t(i) * 4096, Pattern(i, 4096)));
        ASSERT_OK(io.Flush());  // a transaction each: the journal fills and checkpoints
      }
    }
    Spit(crash, Slurp(path));  // as a crash would leave it: transactions after the checkpoint
    ASSERT_OK((*dev)->Close());
  }
  const auto slots = [&](const std::string& file) {  // generations of slots A and B
    std::vector<unsigned char> bytes = Slurp(file);
    std::pair<uint64_t, uint64_t> g;
    for (uint64_t at : {uint64_t{0}, uint64_t{4096}}) {
      auto sb = DecodeSuperblock(&bytes[at], "VSDEDUP1", at, "test");
      EXPECT_OK(sb);
      (at == 0 ? g.first : g.second) = sb ? sb->generation : 0;
    }
    return g;
  };
  const auto check = [&](const std::string& file, CheckMode mode) {
    CheckResult c;
    auto dev = Open("dedup+file:" + file,
                    OpenOptions{.read_only = mode == CheckMode::kReadOnly, .for_check = true});
    EXPECT_OK(dev);
    if (dev) {
      EXPECT_OK((*dev)->Check(mode, &c));
    }
    return c;
  };
  const auto reads_back = [&](const std::string& file) {
    auto dev = Open("dedup+file:" + file, OpenOptions{.read_only = true});
    ASSERT_OK(dev);
    SyncIo io(**dev);
    for (int i = 0; i < 400; ++i) {
      ASSERT_EQ(ReadAt(io, uint64_t(i) * 4096, 4096), Pattern(i, 4096)) << "write " << i;
    }
  };
  // The crash image: its newer slot damaged. Its older one's journal was reused (two
  // checkpoints at least): the older slot's checkpoint is taken from the journal's start, check
  // says so, and -r leaks writes the slot again.
  {
    const auto [a, b] = slots(crash);
    ASSERT_GE(std::max(a, b), 3u) << "fewer than two checkpoints: the journal was not reused";
    std::vector<unsigned char> img = Slurp(crash);
    img[(a > b ? 0 : 4096) + 100] ^= 0xFF;
    Spit(copy, img);
    ASSERT_NO_FATAL_FAILURE(reads_back(copy));
    CheckResult noted = check(copy, CheckMode::kReadOnly);
    EXPECT_EQ(noted.corruptions, 0u);
    ASSERT_EQ(noted.messages.size(), 1u);
    EXPECT_NE(noted.messages[0].find("it was the newer one: the journal starts after a later "
                                     "checkpoint than the slot in use says (transaction "),
              std::string::npos)
        << noted.messages[0];
    EXPECT_EQ(check(copy, CheckMode::kRepairLeaks).repaired, 1u);
    EXPECT_TRUE(check(copy, CheckMode::kReadOnly).messages.empty());
    ASSERT_NO_FATAL_FAILURE(reads_back(copy));
  }
  // The closed image: its older slot damaged. It opens from the newer one; check notes the
  // slot without counting it as corruption; -r leaks rewrites it; then nothing is left to note.
  const auto [a, b] = slots(path);
  std::vector<unsigned char> img = Slurp(path);
  img[(a > b ? 4096 : 0) + 100] ^= 0xFF;
  Spit(copy, img);
  CheckResult noted = check(copy, CheckMode::kReadOnly);
  EXPECT_EQ(noted.corruptions, 0u);
  ASSERT_EQ(noted.messages.size(), 1u);
  EXPECT_TRUE(noted.messages[0].starts_with("dedup: a superblock slot does not decode ("))
      << noted.messages[0];
  EXPECT_NE(noted.messages[0].find("checksum mismatch"), std::string::npos) << noted.messages[0];
  CheckResult repaired = check(copy, CheckMode::kRepairLeaks);
  ASSERT_EQ(repaired.messages.size(), 1u);
  EXPECT_TRUE(repaired.messages[0].starts_with("Repaired: dedup: a superblock slot"))
      << repaired.messages[0];
  EXPECT_EQ(repaired.repaired, 1u);
  EXPECT_TRUE(check(copy, CheckMode::kReadOnly).messages.empty());
  const auto [a2, b2] = slots(copy);  // both decode again
  EXPECT_GT(std::max(a2, b2), std::max(a, b));
}

// A journal transaction in the middle that is corrupt fails the open; a torn last one does not.
TEST(CorruptJournal, MiddleTransactionIsCorruptionTornTailIsNot) {
  TempDir dir;
  const std::string path = dir.File("d.img"), copy = dir.File("copy.img");
  auto dev = Open("dedup+file:" + path + ",create=on,size=24M");
  ASSERT_OK(dev);
  {
    SyncIo io(**dev);
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK(WriteAt(io, i << 20, Pattern(10 + i, 64 << 10)));
      ASSERT_OK(io.Flush());  // one journal transaction each
    }
  }
  // The image as a crash would leave it: journal not yet checkpointed.
  Spit(copy, Slurp(path));
  auto sb = [&] {
    auto file = Open("file:" + copy);
    SyncIo io(**file);
    return *ReadSuperblock(io, "VSDEDUP1", "test");
  }();
  auto img = Slurp(copy);
  std::vector<unsigned char> torn = img;
  // Find the transactions: 4 KiB-aligned headers with magic "VSJ1".
  std::vector<uint64_t> txns;
  for (uint64_t at = sb.journal_offset; at < sb.journal_offset + sb.journal_bytes; at += 4096) {
    if (LoadLE32(&img[at]) == 0x314A5356) txns.push_back(at);
  }
  ASSERT_GE(txns.size(), 3u);
  // Whatever part of the first transaction is damaged, the two after it are valid: corruption
  // (a header that no longer parses, or names another sequence number or volume, or a block
  // of zeros, is not the journal's end when later transactions follow).
  struct Damage {
    const char* what;
    std::function<void(std::vector<unsigned char>&)> apply;
  };
  for (const Damage& d : std::vector<Damage>{
           {"payload", [&](auto& b) { b[txns[0] + 40] ^= 1; }},
           {"magic", [&](auto& b) { b[txns[0]] ^= 0xFF; }},
           {"sequence number", [&](auto& b) { b[txns[0] + 8] ^= 0x08; }},
           {"volume", [&](auto& b) { b[txns[0] + 16] ^= 1; }},
           {"zeroed block", [&](auto& b) { std::fill_n(b.begin() + txns[0], 4096, 0); }},
       }) {
    std::vector<unsigned char> damaged = img;
    d.apply(damaged);
    Spit(copy, damaged);
    auto bad = Open("dedup+file:" + copy);
    ASSERT_FALSE(bad) << d.what << ": the transactions after it would be dropped";
    EXPECT_NE(bad.error().message.find("journal transaction 1 at offset " +
                                       std::to_string(txns[0]) + " is corrupt"),
              std::string::npos)
        << d.what << ": " << bad.error().message;
  }
  torn[txns.back() + 40] ^= 1;
  Spit(copy, torn);
  auto ok = Open("dedup+file:" + copy);
  ASSERT_OK(ok);
  SyncIo io(**ok);
  EXPECT_EQ(ReadAt(io, 0, 64 << 10), Pattern(10, 64 << 10));  // transactions before the tail
}

// ---------------------------------------------------------------------------------------------
// Options

TEST(TransformOptions, BadOptionsNameTheOptionAndTheValue) {
  struct Case {
    std::string spec;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {"dedup:grain=3K+memory:64M", "dedup: option 'grain': 3072 is not a power of two"},
           {"dedup:grain=128K+memory:64M", "from 4K to 64K"},
           {"dedup:verify=maybe+memory:64M", "dedup: option 'verify': expected on or off"},
           {"dedup:size=1000+memory:64M", "dedup: option 'size': 1000 is not a positive multiple"},
           {"zstd:level=99+memory:64M", "zstd: option 'level': 99 is outside"},
           {"zstd:rule=tight+memory:64M", "rule 'tight' is not one of: vsan-osa, sector, packed"},
           {"zstd:rule=min-saving=100+memory:64M", "expected a percentage from 0 to below 100"},
           {"crc32c:grain=5K+memory:64M", "crc32c: option 'grain'"},
           {"dedup+memory:1M", "too small for the metadata"},
       }) {
    auto dev = Open(c.spec);
    ASSERT_FALSE(dev) << c.spec;
    EXPECT_NE(dev.error().message.find(c.want), std::string::npos)
        << c.spec << ": " << dev.error().message;
    // A bad value in the spec is the spec's fault (a usage error, exit 2 in the CLI); a device
    // too small for the layer is not.
    const bool spec_fault = c.want != "too small for the metadata";
    EXPECT_EQ(dev.error().code == make_error_code(Errc::kBadSpec), spec_fault) << c.spec;
  }
}

// A formatted dedup device keeps its own virtual size: one on a device below of more than
// 16 TiB (formatted with size=, as it must be) could not be opened again without size=: the
// device below's size, taken as the default, was refused as too many grains before the
// superblock was read. Here the file grows past that size after the format.
TEST(TransformOptions, AFormattedDedupOpensWithoutSizeOverADeviceBeyondTheLimit) {
  TempDir dir;
  const std::string path = dir.File("d.img");
  {
    auto dev = Open("dedup:size=1M+file:" + path + ",create=on,size=64M");
    ASSERT_OK(dev);
    SyncIo io(**dev);
    AlignedBuffer data(4096);
    std::memset(data.data(), 7, 4096);
    ASSERT_FALSE(io.Write(0, data.span()));
  }
  // 4,294,967,295 grains of 4 KiB: one more than a new device may map (the largest file ext4
  // holds is this size).
  const uint64_t beyond = (DedupDevice::kMaxVirtualGrains + 1) * 4096;
  std::error_code ec;
  std::filesystem::resize_file(path, beyond, ec);
  if (ec)
    GTEST_SKIP() << "this filesystem holds no file of " << beyond << " bytes: " << ec.message();
  auto reopened = Open("dedup+file:" + path);
  ASSERT_OK(reopened);
  EXPECT_EQ((*reopened)->geometry().size_bytes, 1u << 20);
  AlignedBuffer back(4096);
  ASSERT_FALSE(SyncIo(**reopened).Read(0, back.span()));
  EXPECT_EQ(back.data()[0], std::byte{7});
  EXPECT_EQ(back.data()[4095], std::byte{7});
  reopened->reset();
  // A new device there still says what fits (the default size checked before a format).
  std::filesystem::resize_file(path, 0);
  std::filesystem::resize_file(path, beyond);
  auto fresh = Open("dedup:format=on+file:" + path);
  ASSERT_FALSE(fresh);
  EXPECT_NE(fresh.error().message.find("not given, so the size of the device below"),
            std::string::npos)
      << fresh.error().message;
}

// dedup:size=16T ended "use a larger grain or give size=" although size= was given. The message
// now says where the size came from, the largest that fits at the grain, and offers a larger
// grain only where there is one.
TEST(TransformOptions, ADedupSizeBeyondTheReferenceCountSaysWhatFits) {
  struct Case {
    std::string spec;
    std::string want;
  };
  const std::string refcount = ", more than the 4294967294 a 32-bit reference count allows: ";
  for (const Case& c : std::vector<Case>{
           {"dedup:format=on,size=16T+memory:64M",
            "dedup: option 'size': 17592186044416 bytes are 4294967296 grains of 4 KiB" + refcount +
                "at grain 4 KiB the size is at most 17592186036224 bytes; give a smaller size= "
                "or a larger grain"},
           {"dedup:grain=64K,size=256T+memory:64M",
            "dedup: option 'size': 281474976710656 bytes are 4294967296 grains of 64 KiB" +
                refcount +
                "at grain 64 KiB the size is at most 281474976579584 bytes; give a smaller size="},
           {"dedup+null:17T",
            "dedup: option 'size': not given, so the size of the device below: 18691697672192 "
            "bytes are 4563402752 grains of 4 KiB" +
                refcount + "give size= of at most 17592186036224 bytes or a larger grain"},
       }) {
    auto dev = Open(c.spec);
    ASSERT_FALSE(dev) << c.spec;
    EXPECT_EQ(dev.error().code, make_error_code(Errc::kBadSpec)) << dev.error().message;
    // The whole message: nothing after it (no "or give size=" when size= was given).
    EXPECT_EQ(dev.error().message, c.want) << c.spec;
  }
  // The largest size at 4K passes (the parse alone: its metadata would not fit in a test).
  const Registry& reg = Registry::Global();
  const std::vector<OptionInfo>& declared = reg.Find("dedup")->options;
  EXPECT_OK(ParseDedupOptions(OptionValues("dedup", "", {{"size", "17592186036224"}}, &declared),
                              64 << 20));
}

TEST(TransformOptions, ReopenKeepsFormatOptionsAndRefusesContradictions) {
  TempDir dir;
  const std::string path = dir.File("d.img");
  {
    auto dev = Open("zstd:grain=16K,rule=vsan-osa+file:" + path + ",create=on,size=24M");
    ASSERT_OK(dev);
  }
  auto same = Open("zstd+file:" + path);
  ASSERT_OK(same);
  EXPECT_EQ((*same)->geometry().optimal_transfer, 16384u);
  PropertyList props;
  (*same)->Properties(props);
  bool saw_rule = false;
  for (const Property& p : props) {
    if (p.key == "rule") saw_rule = PropertyValueToString(p.value) == "vsan-osa";
  }
  EXPECT_TRUE(saw_rule);
  same->reset();
  auto other = Open("zstd:rule=packed+file:" + path);
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("zstd: option 'rule': the device was formatted with "
                                       "rule=vsan-osa, not packed"),
            std::string::npos)
      << other.error().message;
}

// format=on formats a device that holds no superblock of the layer, but never over another
// vstack layer's valid superblock (a dedup image opened as zstd:format=on was erased, and so
// was it by `check -r all 'zstd:format=on+...'`), as mkfs refuses a file system it recognises.
TEST(TransformOptions, FormatOnNeverFormatsAnotherLayersDevice) {
  TempDir dir;
  const std::string path = dir.File("d.img");
  {
    auto dev = Open("dedup+file:" + path + ",create=on,size=24M");
    ASSERT_OK(dev);
    SyncIo io(**dev);
    ASSERT_OK(WriteAt(io, 0, Pattern(7, 256 << 10)));
    ASSERT_OK(io.Flush());
  }
  const auto before = Slurp(path);
  for (const char* layer : {"zstd", "crc32c"}) {
    auto dev = Open(std::string(layer) + ":format=on+file:" + path);
    ASSERT_FALSE(dev) << layer;
    EXPECT_NE(dev.error().message.find("another vstack layer ('VSDEDUP1')"), std::string::npos)
        << dev.error().message;
  }
  EXPECT_TRUE(Slurp(path) == before) << "the dedup device was written";
  auto dedup = Open("dedup+file:" + path);
  ASSERT_OK(dedup);
  SyncIo io(**dedup);
  EXPECT_EQ(ReadAt(io, 0, 256 << 10), Pattern(7, 256 << 10));
}

TEST(TransformOptions, NonBlankDeviceWithoutSuperblockIsNotFormatted) {
  TempDir dir;
  const std::string path = dir.File("d.img");
  WriteFile(path, 16 << 20, 0xAB);
  for (const char* layer : {"dedup", "zstd", "crc32c"}) {
    auto dev = Open(std::string(layer) + "+file:" + path);
    ASSERT_FALSE(dev) << layer;
    EXPECT_NE(dev.error().message.find("bad magic"), std::string::npos) << dev.error().message;
  }
  EXPECT_EQ(Slurp(path), std::vector<unsigned char>(16 << 20, 0xAB));  // nothing was written
}

}  // namespace
}  // namespace vstack::testing
