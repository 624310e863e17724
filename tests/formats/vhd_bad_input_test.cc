// Corrupt and hostile images: each opens with a clear error naming the field and the offset
// (or, where the spec says to recover, opens and is reported by check), never crashes, never
// reads outside the file, never allocates in proportion to a lying header; `vstack check`
// reports them with exit 2 (corruption) or 3 (leaks), and `-r` repairs what is safe.
#include <gtest/gtest.h>

#include <cstring>

#include "lib/aligned_buffer.h"
#include "lib/spec.h"
#include "lib/sync_io.h"
#include "tests/formats/vhd_test_util.h"
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
  r = Check("-r leaks");
  EXPECT_EQ(r.status, 2) << "-r leaks does not touch checksums: " << r.output;
  r = Check("-r all");
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
  auto r = Check("-r all");
  EXPECT_EQ(r.status, 2) << "overlaps are not repaired (it could lose data): " << r.output;
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
  auto raw = OpenImage(fixed);
  ASSERT_OK(raw);
  EXPECT_EQ((*raw)->kind(), "file") << "nothing says it is a VHD any more: it opens raw";
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
  auto dev = OpenImage(path_);
  ASSERT_FALSE(dev) << "the cookie makes it a VHD, and a broken one";
  EXPECT_NE(dev.error().message.find("checksum mismatch"), std::string::npos);
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
