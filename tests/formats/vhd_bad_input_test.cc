// Corrupt and hostile images: each opens with a clear error naming the field and the offset
// (or, where the spec says to recover, opens and is reported by check), never crashes, never
// reads outside the file, never allocates in proportion to a lying header; `vstack check`
// reports them with exit 2 (corruption) or 3 (leaks), and `-r` repairs what is safe.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "formats/vhd/vhd_bat.h"
#include "lib/aligned_buffer.h"
#include "lib/spec.h"
#include "lib/sync_io.h"
#include "tests/formats/vhd_test_util.h"
#include "tests/testing/recording_device.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

class VhdBadInput : public ::testing::Test {
 protected:
  // A 16 MiB dynamic image (2 MiB blocks) with blocks 0 and 3 written.
  void SetUp() override {
    path_ = dir_.File("bad.vhd");
    auto dev = FileVhd(path_, 16 << 20);
    ASSERT_OK(dev);
    WriteBytes(**dev, 0, std::vector<unsigned char>(4096, 0x11));
    WriteBytes(**dev, 6 << 20, std::vector<unsigned char>(4096, 0x33));
    ASSERT_OK((*dev)->Close());
    bytes_ = ReadAll(path_);
    footer_ = bytes_.size() - 512;
  }

  // Writes the mutated bytes and expects a strict open to fail with `needle` in the message.
  void ExpectOpenError(const std::string& needle) {
    WriteAll(path_, bytes_);
    auto dev = Open("vhd+" + FormatSpecPart(SpecPart{"file", path_, {}}));
    ASSERT_FALSE(dev) << "opened a corrupt image; wanted: " << needle;
    EXPECT_NE(dev.error().message.find(needle), std::string::npos) << dev.error().message;
  }
  CommandResult Check(const std::string& flags = "") {
    return RunVstack("check " + flags + " " + path_);
  }
  uint64_t BatAt() const { return BE64(bytes_, 512 + 16); }
  // Writes a sparse file of `size` bytes holding only the footer copy and header of bytes_
  // (1536 bytes) and its footer at the end: all else, the BAT included, is a hole.
  void WriteSparseHeadAndFooter(uint64_t size) {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes_.data(), 1, 1536, f), 1536u);
    ASSERT_EQ(std::fseek(f, static_cast<long>(size - 512), SEEK_SET), 0);
    ASSERT_EQ(std::fwrite(&bytes_[footer_], 1, 512, f), 512u);
    std::fclose(f);
  }

  TempDir dir_;
  std::string path_;
  std::vector<unsigned char> bytes_;
  uint64_t footer_ = 0;
};

TEST_F(VhdBadInput, FixedFooterChecksumIsAnErrorThatCheckRepairs) {
  ASSERT_OK(CreateImage("vhd", dir_.File("f.vhd"), 1 << 20, "subformat=fixed"));
  path_ = dir_.File("f.vhd");
  bytes_ = ReadAll(path_);
  footer_ = bytes_.size() - 512;
  bytes_[footer_ + 40] ^= 0x01;  // original size: the checksum no longer matches
  ExpectOpenError("VHD footer at offset " + std::to_string(footer_) +
                  ": checksum mismatch: stored");
  auto r = Check();
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("(field at offset " + std::to_string(footer_ + 64) + ")"),
            std::string::npos)
      << r.output;
  // A bare path whose cookie has a bad checksum is not guessed to be a VHD for writing: the
  // repair needs the format named, and says how (it said "`vstack check` it", the command
  // just run).
  r = Check("-r all");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("a repair needs the format named: give 'vhd+file:" + path_ +
                          "' to `vstack check -r`"),
            std::string::npos)
      << r.output;
  const std::string spec = "'vhd+" + FormatSpecPart(SpecPart{"file", path_, {}}) + "'";
  r = RunVstack("check -r leaks " + spec);
  EXPECT_EQ(r.status, 2) << "-r leaks does not touch checksums: " << r.output;
  r = RunVstack("check -r all " + spec);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("1 problem(s) repaired"), std::string::npos) << r.output;
  EXPECT_TRUE(OpenImage(path_));
}

TEST_F(VhdBadInput, HeaderChecksum) {
  bytes_[512 + 40] ^= 0xFF;
  ExpectOpenError("VHD dynamic header at offset 512: checksum mismatch");
  auto r = Check();
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("(field at offset 548)"), std::string::npos) << r.output;
  EXPECT_EQ(Check("-r all").status, 0);
  EXPECT_EQ(ReadBytes(**OpenImage(path_), 6 << 20, 512)[0], 0x33) << "data kept";
}

TEST_F(VhdBadInput, FooterCopyDiffersFromTheEndFooter) {
  bytes_[30] ^= 0x01;  // creator app of the copy at offset 0
  FixFooterChecksum(bytes_, 0);
  WriteAll(path_, bytes_);
  EXPECT_TRUE(OpenImage(path_)) << "the end footer is good: the image opens";
  auto r = Check();
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("footer copy at offset 0 differs"), std::string::npos) << r.output;
  EXPECT_EQ(Check("-r all").status, 0);
  auto fixed = ReadAll(path_);
  EXPECT_EQ(std::memcmp(fixed.data(), &fixed[fixed.size() - 512], 512), 0);
}

TEST_F(VhdBadInput, BothFootersBadIsAnErrorNamingBoth) {
  bytes_[footer_ + 12] = 9;  // end footer version (checksum now wrong too)
  bytes_[0] = 'X';           // copy cookie
  ExpectOpenError("VHD footer at offset " + std::to_string(footer_) + ": checksum mismatch");
  ExpectOpenError("no dynamic-disk footer copy at offset 0");
  EXPECT_EQ(Check().status, 2);
}

TEST_F(VhdBadInput, BatEntryBeyondEofIsClearedByRepair) {
  const uint64_t entry = BatAt() + 4 * 5;  // block 5 (unallocated) points far away
  PutBE32(bytes_, entry, 0x00FFFFFF);
  ExpectOpenError("BAT entry 5 (field at offset " + std::to_string(entry) +
                  ") = sector 16777215: block at offset 8589934080 lies past the end of the file");
  auto r = Check();
  EXPECT_EQ(r.status, 2) << r.output;
  {
    // Opened for check, the rest of the disk is readable; the bad block is not.
    auto dev = OpenImage(path_, OpenOptions{.read_only = true, .for_check = true});
    ASSERT_OK(dev);
    EXPECT_EQ(ReadBytes(**dev, 0, 512)[0], 0x11);
    SyncIo io(**dev);
    AlignedBuffer buf(512, 4096);
    EXPECT_EQ(io.Read(5ull * (2 << 20), buf.span()), make_error_code(Errc::kCorruption));
  }
  EXPECT_EQ(Check("-r all").status, 0);
  EXPECT_EQ(ReadBytes(**OpenImage(path_), 5ull * (2 << 20), 512)[0], 0);
}

TEST_F(VhdBadInput, BatEntryIntoTheMetadataAndOverlappingBlocks) {
  const uint32_t block0 = BE32(bytes_, BatAt());
  PutBE32(bytes_, BatAt() + 4 * 7, 2);  // into the header
  ExpectOpenError("BAT entry 7 (field at offset " + std::to_string(BatAt() + 28) +
                  ") = sector 2: block at offset 1024 overlaps the dynamic header");
  PutBE32(bytes_, BatAt() + 4 * 7, 0xFFFFFFFF);
  PutBE32(bytes_, BatAt() + 4 * 6, block0 + 8);  // 4 KiB into block 0
  ExpectOpenError("blocks of BAT entries 0 (field at offset " + std::to_string(BatAt()) +
                  ") and 6 (field at offset " + std::to_string(BatAt() + 24) + ") overlap");
  const uint64_t size = bytes_.size();
  auto r = Check("-r all");
  EXPECT_EQ(r.status, 2) << "overlaps are not repaired (it could lose data): " << r.output;
  EXPECT_EQ(r.output.find("Leaked"), std::string::npos) << "corruption, not a leak: " << r.output;
  // The repair freed nothing: both blocks' data is still there, readable with recover=on.
  EXPECT_EQ(FileSize(path_), size);
  auto dev = Open("vhd:recover=on+" + FormatSpecPart(SpecPart{"file", path_, {}}),
                  OpenOptions{.read_only = true});
  ASSERT_OK(dev);
  EXPECT_EQ(ReadBytes(**dev, 0, 4096), std::vector<unsigned char>(4096, 0x11));
  EXPECT_EQ(ReadBytes(**dev, 6 << 20, 4096), std::vector<unsigned char>(4096, 0x33));
}

// The recipe: a 2 MiB disk of four distinct 512 KiB blocks, then BAT[3] = BAT[2].
// `check` calls it corruption (not a leak), `-r leaks` and `-r all` free nothing, and the
// advice check prints (convert with vhd:recover=on) copies every block out.
TEST(VhdOverlap, DuplicateBatEntryLosesNoDataAndCheckAdviceWorks) {
  TempDir dir;
  const std::string path = dir.File("dup.vhd");
  ASSERT_OK(CreateImage("vhd", path, 2 << 20, "block_size=512K"));
  {
    auto dev = OpenImage(path);
    ASSERT_OK(dev);
    for (int b = 0; b < 4; ++b) {
      WriteBytes(**dev, uint64_t(b) * (512 << 10),
                 std::vector<unsigned char>(512 << 10, static_cast<unsigned char>(0xA0 + b)));
    }
  }
  auto bytes = ReadAll(path);
  const uint64_t bat = BE64(bytes, 512 + 16);
  PutBE32(bytes, bat + 12, BE32(bytes, bat + 8));
  WriteAll(path, bytes);
  const uint64_t size = bytes.size();

  auto r = RunVstack("check " + path);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("blocks of BAT entries 2"), std::string::npos) << r.output;
  // Only block 3's old place, which no entry points at any more, is unused; block 2 (which
  // both entries point into) is not (it used to be reported, and freed, with it).
  const size_t leak = r.output.find("Leaked VHD: ");
  ASSERT_NE(leak, std::string::npos) << r.output;
  EXPECT_LT(std::stoull(r.output.substr(leak + 12)), 2u * (512 + (512 << 10))) << r.output;
  EXPECT_NE(r.output.find("vhd:recover=on+file:"), std::string::npos) << r.output;
  for (const std::string mode : {"leaks", "all"}) {
    r = RunVstack("check -r " + mode + " " + path);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_EQ(FileSize(path), size)
        << "-r " << mode << " freed space while entries are corrupt: " << r.output;
  }
  EXPECT_EQ(ReadAll(path), bytes) << "nothing was changed";
  // Follow the advice.
  const std::string out = dir.File("saved.vhd");
  const std::string src = "vhd:recover=on+" + FormatSpecPart(SpecPart{"file", path, {}});
  r = RunVstack("convert -O vhd '" + src + "' " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  auto saved = OpenImage(out);
  ASSERT_OK(saved);
  for (int b = 0; b < 4; ++b) {
    const unsigned char want = static_cast<unsigned char>(0xA0 + (b == 3 ? 2 : b));
    EXPECT_EQ(ReadBytes(**saved, uint64_t(b) * (512 << 10), 512 << 10),
              std::vector<unsigned char>(512 << 10, want))
        << "block " << b;
  }
  saved->reset();
  EXPECT_EQ(RunVstack("check " + out).status, 0);
  // recover=on is read-only, even when opened for writing.
  auto rw = Open(src);
  if (rw) {
    EXPECT_TRUE((*rw)->read_only());
  }
}

TEST_F(VhdBadInput, HugeMaxTableEntriesNeedsNoMemory) {
  PutBE32(bytes_, 512 + 28, 0xFFFFFFFF);
  FixHeaderChecksum(bytes_, 512);
  ExpectOpenError(
      "max_table_entries 4294967295 (field at offset 540) needs a 17179869184-byte "
      "BAT at offset 1536, which runs past the footer");
  EXPECT_EQ(Check().status, 2);
  PutBE32(bytes_, 512 + 28, 3);  // too few for 16 MiB
  FixHeaderChecksum(bytes_, 512);
  ExpectOpenError("max_table_entries 3 (field at offset 540) is too small");
}

TEST_F(VhdBadInput, MoreBatEntriesThanTheFormatAllowsAreRefusedBeforeReading) {
  // 64 Mi entries (a 256 MiB BAT) for a 16 MiB disk: more than even a 2040 GiB disk of 2 MiB
  // blocks has, whatever the file holds.
  PutBE32(bytes_, 512 + 28, 64u << 20);
  FixHeaderChecksum(bytes_, 512);
  WriteSparseHeadAndFooter(300u << 20);  // room for the table: the cap refuses it
  auto dev = Open("vhd+" + FormatSpecPart(SpecPart{"file", path_, {}}));
  ASSERT_FALSE(dev);
  const std::string& m = dev.error().message;
  EXPECT_NE(m.find("max_table_entries 67108864 (field at offset 540) is more than a "), m.npos)
      << m;
  EXPECT_NE(m.find("-byte blocks can use (9 entries; at most 1044480 are accepted)"), m.npos) << m;
}

// The 8 KiB sparse file: a footer copy, header and footer in an otherwise empty 1 GiB file
// whose header claims 1,000,000 entries (within the cap). The BAT is a hole, so the load
// refuses it before reading 4 MB of zeros, and check reports it.
TEST_F(VhdBadInput, SparseFileWhoseBatIsAHoleIsRefusedWithoutReadingIt) {
  PutBE32(bytes_, 512 + 28, 1000000);
  FixHeaderChecksum(bytes_, 512);
  WriteSparseHeadAndFooter(1ull << 30);
  auto dev = Open("vhd+" + FormatSpecPart(SpecPart{"file", path_, {}}));
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message.find("the BAT at offset 1536 is a hole in the file"),
            std::string::npos)
      << dev.error().message;
  auto r = Check();
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("is a hole in the file"), std::string::npos) << r.output;
}

// Every entry of a 131,072-entry BAT (a 256 GiB disk) points past the end. A lenient load keeps
// at most kMaxStoredFindings messages and counts the rest, and `-r all` clears all of them
// with one write per BAT sector (1,024), not one table rebuild and write per entry.
TEST(VhdLargeBat, RepairIsLinearAndMessagesAreCapped) {
  TempDir dir;
  const std::string path = dir.File("large.vhd");
  constexpr uint32_t kEntries = 131072;
  ASSERT_OK(CreateImage("vhd", path, uint64_t{kEntries} * (2 << 20)));
  auto bytes = ReadAll(path);
  const uint64_t bat = BE64(bytes, 512 + 16);
  for (uint32_t i = 0; i < kEntries; ++i) PutBE32(bytes, bat + 4ull * i, 0x00FFFFFF);
  WriteAll(path, bytes);

  auto file = Open("file:" + path);
  ASSERT_OK(file);
  auto img = vhd::LoadImage(**file, /*lenient=*/true);
  ASSERT_OK(img);
  EXPECT_LE(img->findings.size(), vhd::VhdImage::kMaxStoredFindings);
  EXPECT_EQ(img->CountFindings(vhd::Finding::kCorruption), kEntries);
  EXPECT_EQ(img->clear_entries.size(), kEntries);

  auto* rec = new RecordingDevice(std::move(*file));
  vhd::VhdOptions options;
  options.for_check = true;
  auto dev = vhd::VhdDevice::Open(DevicePtr(rec), options);
  ASSERT_OK(dev);
  CheckResult before;
  ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &before));
  EXPECT_EQ(before.corruptions, kEntries);
  EXPECT_LE(before.messages.size(), vhd::VhdImage::kMaxStoredFindings + 2);
  CheckResult repaired;
  ASSERT_OK((*dev)->Check(CheckMode::kRepairAll, &repaired));
  EXPECT_EQ(repaired.repaired, kEntries);
  EXPECT_EQ(repaired.corruptions, 0u);
  const auto log = rec->Log();
  const auto writes =
      std::count_if(log.begin(), log.end(), [](const RecordedOp& o) { return o.op == Op::kWrite; });
  EXPECT_EQ(writes, kEntries / vhd::kEntriesPerBatSector) << "one write per BAT sector";
  ASSERT_OK((*dev)->Close());
  dev->reset();
  EXPECT_EQ(RunVstack("check " + path).status, 0);
}

TEST_F(VhdBadInput, BlockSizeZeroOrNotAPowerOfTwo) {
  for (uint32_t bs : {0u, 3u << 20, 1000u}) {
    PutBE32(bytes_, 512 + 32, bs);
    FixHeaderChecksum(bytes_, 512);
    ExpectOpenError("block size " + std::to_string(bs) +
                    " is not a power of two between 512 bytes and 256 MiB (field at offset 544)");
  }
}

TEST_F(VhdBadInput, TruncatedFiles) {
  // A dynamic image cut inside block 3: the copy at offset 0 is used, block 3 is past the end.
  bytes_.resize(bytes_.size() - 4096);
  ExpectOpenError("block at offset");
  auto r = Check();
  EXPECT_EQ(r.status, 2) << r.output;
  // A fixed image cut short: no footer at the end, and none elsewhere.
  const std::string fixed = dir_.File("fixed.vhd");
  ASSERT_OK(CreateImage("vhd", fixed, 1 << 20, "subformat=fixed,force_size=on"));
  auto f = ReadAll(fixed);
  f.resize(f.size() - 1024);
  WriteAll(fixed, f);
  auto raw = OpenImage(fixed, OpenOptions{.read_only = true});
  ASSERT_OK(raw);
  EXPECT_EQ((*raw)->kind(), "file") << "nothing says it is a VHD any more: it opens raw";
  raw->reset();
  auto raw_rw = OpenImage(fixed);
  ASSERT_OK(raw_rw);
  EXPECT_EQ((*raw_rw)->kind(), "raw-guard") << "opened writable, raw stays raw";
  // Cut so that the footer survives but the data does not.
  ASSERT_OK(CreateImage("vhd", dir_.File("fixed2.vhd"), 1 << 20, "subformat=fixed,force_size=on"));
  f = ReadAll(dir_.File("fixed2.vhd"));
  std::vector<unsigned char> cut(f.end() - 512, f.end());
  cut.insert(cut.begin(), 4096, 0);
  WriteAll(dir_.File("fixed2.vhd"), cut);
  auto dev = OpenImage(dir_.File("fixed2.vhd"));
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message.find("fixed disk truncated: current size 1048576"),
            std::string::npos)
      << dev.error().message;
  EXPECT_EQ(RunVstack("check " + dir_.File("fixed2.vhd")).status, 2);
}

TEST_F(VhdBadInput, ABlockTheEndCutsKeepsWhatIsLeftInRecoveryAndRepair) {
  // Block 3 (virtual 6-8 MiB) written whole, then the file cut 1 MiB into its data: its first
  // MiB is still in the file. recover=on read the whole block as zeros, and `check -r all`
  // wrote the footer at the cut, inside the block, and left the entry "not repaired".
  {
    auto dev = OpenImage(path_);  // the fixture's image
    ASSERT_OK(dev);
    WriteBytes(**dev, 6 << 20, std::vector<unsigned char>(2 << 20, 0x44));
    ASSERT_OK((*dev)->Close());
  }
  bytes_ = ReadAll(path_);
  const uint64_t block_end = bytes_.size() - 512;  // block 3 is the last structure
  bytes_.resize(block_end - (1 << 20));
  WriteAll(path_, bytes_);
  const std::vector<unsigned char> kept(1 << 20, 0x44), zeros(1 << 20, 0);
  {
    auto dev = Open("vhd:recover=on+" + FormatSpecPart(SpecPart{"file", path_, {}}));
    ASSERT_OK(dev);
    EXPECT_EQ(ReadBytes(**dev, 6 << 20, 1 << 20), kept) << "the part left in the file";
    EXPECT_EQ(ReadBytes(**dev, 7 << 20, 1 << 20), zeros) << "the part cut off";
  }
  auto r = Check();
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("runs past the end of the file"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(repairable with -r all)"), std::string::npos) << r.output;
  r = Check("-r all");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Extended the file"), std::string::npos) << r.output;
  EXPECT_EQ(FileSize(path_), block_end + 512) << "the footer follows the block";
  EXPECT_EQ(Check().status, 0);
  auto dev = OpenImage(path_, OpenOptions{.read_only = true});
  ASSERT_OK(dev);
  EXPECT_EQ(ReadBytes(**dev, 6 << 20, 1 << 20), kept);
  EXPECT_EQ(ReadBytes(**dev, 7 << 20, 1 << 20), zeros) << "no footer inside the block";
}

TEST_F(VhdBadInput, DataOffsetPointingIntoTheFooter) {
  PutBE64(bytes_, footer_ + 16, footer_);
  FixFooterChecksum(bytes_, footer_);
  std::copy(bytes_.begin() + footer_, bytes_.end(), bytes_.begin());  // keep the copy equal
  ExpectOpenError("dynamic header offset " + std::to_string(footer_) + " (field at offset " +
                  std::to_string(footer_ + 16) +
                  "): the 1024-byte header would overlap the "
                  "footer");
  EXPECT_EQ(Check().status, 2);
}

TEST_F(VhdBadInput, TooSmallAndGarbageFiles) {
  WriteAll(path_, std::vector<unsigned char>(100, 0));
  EXPECT_FALSE(Open("vhd+file:" + path_));
  std::vector<unsigned char> junk(8192, 0);
  std::memcpy(&junk[8192 - 512], "conectix", 8);  // a cookie and nothing else
  WriteAll(path_, junk);
  // A cookie whose footer is invalid is reported, not guessed (neither VHD nor raw), for
  // reading and for writing; naming the format opens it either way.
  for (bool read_only : {true, false}) {
    auto dev = OpenImage(path_, OpenOptions{.read_only = read_only});
    ASSERT_FALSE(dev) << "the cookie makes it look like a VHD, and a broken one";
    EXPECT_NE(dev.error().message.find("looks like a vhd image but is not a valid one (VHD "
                                       "footer at offset 7680: checksum mismatch"),
              std::string::npos)
        << dev.error().message;
    EXPECT_NE(dev.error().message.find("name the format"), std::string::npos);
  }
  EXPECT_TRUE(Open(FormatSpecPart(SpecPart{"file", path_, {}})));
  EXPECT_EQ(Check().status, 2) << "a read-only check opens it as a VHD to report it";
}

// A hole smaller than a block between two blocks: compact moves whole blocks into holes, so it
// cannot reclaim it, and check says so (it said "reclaimed by `vstack compact`").
TEST_F(VhdBadInput, AHoleSmallerThanABlockIsNotPromisedToCompact) {
  const uint32_t block3 = BE32(bytes_, BatAt() + 4 * 3);
  bytes_.insert(bytes_.begin() + uint64_t{block3} * 512, 64 << 10, 0);  // 64 KiB before block 3
  PutBE32(bytes_, BatAt() + 4 * 3, block3 + 128);
  WriteAll(path_, bytes_);
  auto r = Check();
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_NE(r.output.find("69120 unused bytes at offset"), std::string::npos)  // + the padding
      << r.output;
  EXPECT_NE(r.output.find("smaller than a block"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("reclaimed by `vstack compact`"), std::string::npos) << r.output;
  ASSERT_EQ(RunVstack("compact " + path_).status, 0);
  EXPECT_EQ(FileSize(path_), bytes_.size()) << "compact did not reclaim it, as check said";
  auto dev = OpenImage(path_, OpenOptions{.read_only = true});
  ASSERT_OK(dev);
  EXPECT_EQ(ReadBytes(**dev, 6 << 20, 4096), std::vector<unsigned char>(4096, 0x33));
}

TEST_F(VhdBadInput, LeakedTailIsReportedAndReclaimed) {
  bytes_.insert(bytes_.end() - 512, 3 << 20, 0xAB);  // 3 MiB of garbage before the footer
  WriteAll(path_, bytes_);
  ASSERT_TRUE(OpenImage(path_)) << "leaks do not stop an open";
  auto r = Check();
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_NE(r.output.find("3145728 unused bytes at offset"), std::string::npos) << r.output;
  r = Check("-r leaks");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(FileSize(path_), bytes_.size() - (3 << 20));
  auto dev = OpenImage(path_);
  ASSERT_OK(dev);
  EXPECT_EQ(ReadBytes(**dev, 6 << 20, 512)[0], 0x33);
}

}  // namespace
}  // namespace vstack::testing
