// The image tools on image files, called as a program linking vstack would: CompactImage (VHD
// and VHDX through one report and progress type), CommitImage and RebaseImage with their
// progress, MapImage and BackingChain on a differencing chain.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <tuple>

#include "imagetools/check.h"
#include "imagetools/commit.h"
#include "imagetools/compact.h"
#include "imagetools/compare.h"
#include "imagetools/convert.h"
#include "imagetools/map.h"
#include "imagetools/rebase.h"
#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"

namespace vstack {
namespace {

constexpr uint64_t kBlock = 1 << 20;

// Writes `value` over [offset, offset + length) of the image at `spec_or_path`.
void Fill(const std::string& spec_or_path, uint64_t offset, uint64_t length, uint8_t value) {
  auto dev = OpenImage(spec_or_path);
  ASSERT_OK(dev);
  {
    SyncIo io(**dev);
    AlignedBuffer buf(length, 4096);
    std::memset(buf.data(), value, length);
    ASSERT_OK(io.Write(offset, buf.span()));
  }
  ASSERT_OK((*dev)->Close());
}

uint64_t FileSize(const std::string& path) { return std::filesystem::file_size(path); }

// What the image at `path` reads, whole (empty if it does not open).
std::vector<uint8_t> Contents(const std::string& path) {
  auto dev = OpenImage(path, {.read_only = true});
  EXPECT_OK(dev);
  std::vector<uint8_t> out(dev ? (*dev)->geometry().size_bytes : 0);
  if (dev) {
    EXPECT_OK(SyncIo(**dev).Read(0, std::as_writable_bytes(std::span(out))));
  }
  return out;
}

// Four 1 MiB blocks, the second written with zeros: one all-zero block to free, and the last
// block to move into its place.
class CompactImageTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CompactImageTest, FreesZeroBlocksMovesTheLastAndReportsEachStage) {
  const std::string format = GetParam();
  testing::TempDir dir;
  const std::string path = dir.File("d." + format);
  ASSERT_OK(CreateImage(format, path, 4 * kBlock, "block_size=1M"));
  for (int block = 0; block < 4; ++block) {
    Fill(path, block * kBlock, kBlock, block == 1 ? 0 : 0x5a);
  }
  const std::string copy = dir.File("before.raw");
  {
    auto src = OpenImage(path, {.read_only = true});
    ASSERT_OK(src);
    ASSERT_OK(CreateImage("raw", copy, (*src)->geometry().size_bytes));
    auto dst = OpenImage("file:" + copy);
    ASSERT_OK(dst);
    ASSERT_OK(CopyImage(**src, **dst));
    ASSERT_OK((*dst)->Close());
    ASSERT_OK((*src)->Close());
  }
  const uint64_t size_before = FileSize(path);

  std::vector<std::tuple<CompactStage, uint64_t, uint64_t>> calls;
  auto report = CompactImage(path, [&](CompactStage stage, uint64_t done, uint64_t total) {
    calls.emplace_back(stage, done, total);
  });
  ASSERT_OK(report);
  EXPECT_EQ(report->file_size_before, size_before);
  EXPECT_EQ(report->file_size_after, FileSize(path));
  EXPECT_LT(report->file_size_after, report->file_size_before);
  EXPECT_EQ(report->blocks_before + report->space_released, 4u);
  EXPECT_EQ(report->zero_blocks_freed + report->space_released, 1u);
  EXPECT_EQ(report->blocks_moved, 1u);
  // Scan calls first, counting to the blocks before; then move calls, counting to those moved.
  ASSERT_FALSE(calls.empty());
  size_t i = 0;
  for (; i < calls.size() && std::get<0>(calls[i]) == CompactStage::kScan; ++i) {
    EXPECT_EQ(std::get<2>(calls[i]), report->blocks_before);
  }
  ASSERT_GT(i, 0u);
  EXPECT_EQ(std::get<1>(calls[i - 1]), report->blocks_before);
  ASSERT_LT(i, calls.size());
  for (size_t j = i; j < calls.size(); ++j) {
    EXPECT_EQ(std::get<0>(calls[j]), CompactStage::kMove);
    EXPECT_EQ(std::get<2>(calls[j]), 1u);
  }
  EXPECT_EQ(std::get<1>(calls.back()), 1u);

  auto after = OpenImage(path, {.read_only = true});
  ASSERT_OK(after);
  auto before = OpenImage("file:" + copy, {.read_only = true});
  ASSERT_OK(before);
  auto same = CompareImages(**before, **after);
  ASSERT_OK(same);
  EXPECT_TRUE(same->identical);
}

TEST_P(CompactImageTest, TakesASpecNamingTheFormat) {
  const std::string format = GetParam();
  testing::TempDir dir;
  const std::string path = dir.File("d." + format);
  ASSERT_OK(CreateImage(format, path, 2 * kBlock, "block_size=1M"));
  Fill(path, 0, kBlock, 0);
  auto report = CompactImage(format + "+file:" + path);  // no progress callback
  ASSERT_OK(report);
  EXPECT_EQ(report->blocks_moved, 0u);
  EXPECT_LE(report->file_size_after, report->file_size_before);
}

INSTANTIATE_TEST_SUITE_P(Formats, CompactImageTest, ::testing::Values("vhd", "vhdx"));

TEST(CompactImage, RefusesWhatNoFormatCanCompact) {
  testing::TempDir dir;
  const std::string raw = dir.File("d.raw");
  ASSERT_OK(CreateImage("raw", raw, 4 * kBlock));
  auto r = CompactImage(raw);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, make_error_code(Errc::kInvalidArgument));
  EXPECT_NE(r.error().message.find("(vhd, vhdx)"), std::string::npos) << r.error().message;
  auto spec = CompactImage("passthrough+file:" + raw);
  ASSERT_FALSE(spec);
  EXPECT_EQ(spec.error().code, make_error_code(Errc::kInvalidArgument));
  const std::string fixed = dir.File("f.vhd");
  ASSERT_OK(CreateImage("vhd", fixed, 4 * kBlock, "subformat=fixed"));
  auto refused = CompactImage(fixed);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, make_error_code(Errc::kNotSupported));
  EXPECT_FALSE(CompactImage(dir.File("missing.vhd")));
}

// base.vhd (all 0x11) <- child.vhd, which holds 1 MiB + 512 bytes of its own. Both are a little
// larger than 4 MiB (a VHD's size is rounded to its CHS geometry).
class ChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = dir_.File("base.vhd");
    child_ = dir_.File("child.vhd");
    ASSERT_OK(CreateImage("vhd", base_, 4 * kBlock));
    {
      auto base = OpenImage(base_, {.read_only = true});
      ASSERT_OK(base);
      size_ = (*base)->geometry().size_bytes;
    }
    Fill(base_, 0, size_, 0x11);
    ASSERT_OK(CreateImage("vhd", child_, 0, "backing_file=base.vhd"));
    Fill(child_, kBlock, kBlock, 0x22);
    Fill(child_, 3 * kBlock, 512, 0x33);
  }

  testing::TempDir dir_;
  std::string base_, child_;
  uint64_t size_ = 0;
};

TEST_F(ChainTest, CommitImageCopiesTheChildsDataAndCountsIt) {
  const std::vector<uint8_t> child_view = Contents(child_);
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  CommitOptions options;
  options.progress = [&](uint64_t done, uint64_t total) { calls.emplace_back(done, total); };
  auto bytes = CommitImage(child_, options);
  ASSERT_OK(bytes);
  EXPECT_GE(*bytes, kBlock + 512);  // the child's own sectors, rounded as its bitmaps hold them
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), std::make_pair(*bytes, *bytes));
  EXPECT_TRUE(Contents(base_) == child_view) << "the parent reads as the child did";
  EXPECT_TRUE(Contents(child_) == child_view) << "the child still reads the same";
}

// Ctrl-C during `vstack commit` killed it: the parent kept the room it had reserved for new
// blocks, a leak that check reported (exit 3) even after the commit was run again, and nothing
// was said. A stop (here asked by the progress callback after the first 1 MiB, as the signal
// handler sets it) ends the copy, closes the parent as after a whole commit and says how far it
// got; the parent checks clean, the child is unchanged, and the commit run again finishes.
TEST_F(ChainTest, CommitImageStopsWhenAskedAndLeavesBothImagesClean) {
  Fill(child_, 0, 3 * kBlock, 0x44);  // 3 MiB + 512 bytes of the child's own
  const std::vector<uint8_t> child_view = Contents(child_);
  std::atomic<bool> stop{false};
  CommitOptions options;
  options.stop = &stop;
  options.progress = [&](uint64_t done, uint64_t) { stop = done >= kBlock; };
  auto stopped = CommitImage(child_, options);
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().code, make_error_code(Errc::kCancelled));
  EXPECT_NE(stopped.error().message.find("interrupted after 1048576 of"), std::string::npos)
      << stopped.error().message;
  EXPECT_NE(stopped.error().message.find("nothing is lost"), std::string::npos)
      << stopped.error().message;
  for (const std::string& path : {base_, child_}) {
    auto report = CheckImage(path);
    ASSERT_OK(report);
    EXPECT_EQ(report->exit_code(), 0) << path << " is not clean after the stop";
  }
  EXPECT_TRUE(Contents(child_) == child_view);
  ASSERT_OK(CommitImage(child_, {}));
  EXPECT_TRUE(Contents(base_) == child_view);
}

// The same for rebase: stopped part way, the child keeps its old parent, reads as before and
// checks clean; run again, it finishes.
TEST_F(ChainTest, RebaseImageStopsWhenAskedAndKeepsTheOldParent) {
  const std::string fresh = dir_.File("fresh.vhd");
  ASSERT_OK(CreateImage("vhd", fresh, 4 * kBlock));
  const std::vector<uint8_t> child_view = Contents(child_);
  std::atomic<bool> stop{false};
  RebaseOptions options;
  options.stop = &stop;
  options.progress = [&](uint64_t done, uint64_t) { stop = done >= kBlock; };
  auto stopped = RebaseImage(child_, "fresh.vhd", options);
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().code, make_error_code(Errc::kCancelled));
  EXPECT_NE(stopped.error().message.find("keeps its old parent"), std::string::npos)
      << stopped.error().message;
  {
    auto chain = OpenImage(child_, {.read_only = true});
    ASSERT_OK(chain);
    EXPECT_TRUE(BackingChain("vhd+file:" + child_, **chain)[1].spec.ends_with("base.vhd"));
  }
  auto report = CheckImage(child_);
  ASSERT_OK(report);
  EXPECT_EQ(report->exit_code(), 0) << "the child is not clean after the stop";
  EXPECT_TRUE(Contents(child_) == child_view);
  ASSERT_OK(RebaseImage(child_, "fresh.vhd", {}));
  EXPECT_TRUE(Contents(child_) == child_view);
}

// A commit that fills the disk stops with the cause and says that nothing is lost, which holds:
// the child reads as before, and once there is room the same commit finishes.
TEST(CommitOnAFullDisk, StopsSayingNothingIsLostAndFinishesOnceThereIsRoom) {
  testing::TempDir dir;
  const std::string mount = dir.File("fs");
  testing::SmallFilesystem fs(mount, "8m");
  if (!fs.mounted()) GTEST_SKIP() << "mounting a tmpfs is not permitted here (CI runs as root)";
  const std::string parent = mount + "/parent.vhd", child = mount + "/child.vhd";
  ASSERT_OK(CreateImage("vhd", parent, 16 * kBlock));
  ASSERT_OK(CreateImage("vhd", child, 0, "backing_file=parent.vhd"));
  Fill(child, 0, 5 * kBlock, 0x5c);  // 5 MiB in the child; the parent needs as much again
  const std::vector<uint8_t> before = Contents(child);
  auto full = CommitImage(child, {});
  ASSERT_FALSE(full) << "the commit fit on the small filesystem";
  const std::string& words = full.error().message;
  EXPECT_NE(words.find("No space left on device"), std::string::npos) << words;
  EXPECT_NE(words.find("committing into the parent '" + parent + "'"), std::string::npos) << words;
  EXPECT_NE(words.find("nothing is lost"), std::string::npos) << words;
  EXPECT_TRUE(Contents(child) == before) << "the child reads differently after the failed commit";

  ASSERT_EQ(testing::RunCommand("mount -o remount,size=64m " + mount).status, 0);
  auto done = CommitImage(child, {});
  ASSERT_OK(done);
  EXPECT_EQ(*done, 5 * kBlock);
  EXPECT_TRUE(Contents(parent) == before) << "the parent does not read as the child did";
}

// A safe rebase that fills the disk said only "vhd: write at offset N: No space left on
// device", leaving the user to wonder whether the child survived. It says what commit says on
// a full disk: where it stopped, that nothing is lost (the child keeps its old parent and reads
// as before), and what to do; once there is room, the same rebase finishes.
TEST(RebaseOnAFullDisk, StopsSayingNothingIsLostAndFinishesOnceThereIsRoom) {
  testing::TempDir dir;
  const std::string mount = dir.File("fs");
  testing::SmallFilesystem fs(mount, "8m");
  if (!fs.mounted()) GTEST_SKIP() << "mounting a tmpfs is not permitted here (CI runs as root)";
  const std::string base = mount + "/base.vhd", child = mount + "/child.vhd",
                    fresh = mount + "/fresh.vhd";
  ASSERT_OK(CreateImage("vhd", base, 16 * kBlock));
  Fill(base, 0, 5 * kBlock, 0x5c);  // 5 MiB in the old parent, which the child must take in
  ASSERT_OK(CreateImage("vhd", child, 0, "backing_file=base.vhd"));
  ASSERT_OK(CreateImage("vhd", fresh, 16 * kBlock));
  const std::vector<uint8_t> before = Contents(child);
  auto full = RebaseImage(child, "fresh.vhd", {});
  ASSERT_FALSE(full) << "the rebase fit on the small filesystem";
  const std::string& words = full.error().message;
  EXPECT_NE(words.find("No space left on device"), std::string::npos) << words;
  EXPECT_NE(words.find("rebasing '" + child + "' onto 'fresh.vhd'"), std::string::npos) << words;
  EXPECT_NE(words.find("nothing is lost"), std::string::npos) << words;
  EXPECT_NE(words.find("keeps its old parent"), std::string::npos) << words;
  EXPECT_TRUE(Contents(child) == before) << "the child reads differently after the failed rebase";
  {
    auto chain = OpenImage(child, {.read_only = true});
    ASSERT_OK(chain);
    EXPECT_TRUE(BackingChain("vhd+file:" + child, **chain)[1].spec.ends_with("base.vhd"));
  }

  ASSERT_EQ(testing::RunCommand("mount -o remount,size=64m " + mount).status, 0);
  ASSERT_OK(RebaseImage(child, "fresh.vhd", {}));
  EXPECT_TRUE(Contents(child) == before) << "the child does not read as before";
}

// Zeros a child wrote hide its parent's data: compacting the child must not give those blocks
// back (it did, as for a dynamic image, and the parent's 0x11 showed through again).
TEST_F(ChainTest, CompactImageKeepsTheZerosAChildWroteOverItsParent) {
  Fill(child_, 0, 2 * kBlock, 0x00);  // the child's first block (2 MiB), all zeros now
  const std::vector<uint8_t> child_view = Contents(child_);
  ASSERT_EQ(child_view[0], 0);
  ASSERT_EQ(child_view[2 * kBlock], 0x11);  // from the parent
  auto report = CompactImage(child_);
  ASSERT_OK(report);
  EXPECT_EQ(report->zero_blocks_freed, 0u);
  EXPECT_TRUE(Contents(child_) == child_view) << "the child reads differently after compact";
}

// convert --overwrite into the source's own parent would orphan the source (and any other
// child of that parent): refused, the parent untouched.
TEST_F(ChainTest, ConvertImageNeverReplacesAParentOfTheSource) {
  const std::vector<uint8_t> base_view = Contents(base_);
  auto child = OpenImage(child_, {.read_only = true});
  ASSERT_OK(child);
  ConvertOptions o;
  o.format = "vhd";
  o.overwrite = true;
  auto r = ConvertImage(**child, base_, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("is a parent of the source"), std::string::npos)
      << r.error().message;
  EXPECT_TRUE(Contents(base_) == base_view);
}

TEST_F(ChainTest, RebaseImageKeepsTheChildsContentsOntoANewParent) {
  const std::string fresh = dir_.File("fresh.vhd");
  ASSERT_OK(CreateImage("vhd", fresh, 4 * kBlock));
  const std::vector<uint8_t> child_view = Contents(child_);
  RebaseOptions qcow2;
  qcow2.backing_format = "qcow2";
  auto refused = RebaseImage(child_, "fresh.vhd", qcow2);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, make_error_code(Errc::kInvalidArgument));

  std::vector<std::pair<uint64_t, uint64_t>> calls;
  RebaseOptions options;
  options.progress = [&](uint64_t done, uint64_t total) { calls.emplace_back(done, total); };
  auto bytes = RebaseImage(child_, "fresh.vhd", options);
  ASSERT_OK(bytes);
  // Everything the child did not hold read 0x11 through base.vhd and reads zeros in fresh.vhd.
  EXPECT_GE(*bytes, 2 * kBlock);
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back().first, calls.back().second);
  EXPECT_TRUE(Contents(child_) == child_view) << "safe mode keeps what the child reads";
  auto chain = OpenImage(child_, {.read_only = true});
  ASSERT_OK(chain);
  const std::vector<ChainImage> images = BackingChain("vhd+file:" + child_, **chain);
  ASSERT_EQ(images.size(), 2u);
  EXPECT_TRUE(images[1].spec.ends_with("fresh.vhd")) << images[1].spec;
}

// rebase -u of an image that is not a differencing VHD said "the new parent path ... does not
// fit in the child's parent-locator space" (a dynamic disk has no locator slots), as if a
// shorter path would do; it is refused as safe mode refuses it, the file unchanged.
TEST_F(ChainTest, RebaseImageUnsafeRefusesAnImageWithoutAParent) {
  const std::string dynamic = dir_.File("dynamic.vhd");
  ASSERT_OK(CreateImage("vhd", dynamic, 4 * kBlock));
  const auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string before = bytes(dynamic);
  for (const bool unsafe : {true, false}) {
    SCOPED_TRACE(unsafe);
    RebaseOptions options;
    options.unsafe = unsafe;
    auto r = RebaseImage(dynamic, "base.vhd", options);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, make_error_code(Errc::kInvalidArgument));
    EXPECT_NE(r.error().message.find("is not a differencing VHD"), std::string::npos)
        << r.error().message;
    EXPECT_EQ(bytes(dynamic), before);
  }
}

TEST_F(ChainTest, MapImageNamesTheLevelAndFileOfEachExtent) {
  auto chain = OpenImage(child_, {.read_only = true});
  ASSERT_OK(chain);
  auto map = MapImage(**chain);
  ASSERT_OK(map);
  EXPECT_TRUE(map->chain);
  EXPECT_EQ(map->data_bytes(), size_);
  // [0, 1M) base, [1M, 2M) child, [2M, 3M) base, [3M, 3M + 512) child, the rest base.
  ASSERT_EQ(map->extents.size(), 5u);
  uint64_t end = 0;
  for (size_t i = 0; i < map->extents.size(); ++i) {
    const ImageExtent& e = map->extents[i];
    EXPECT_EQ(e.offset, end);
    end = e.offset + e.length;
    const bool child = i % 2 == 1;
    EXPECT_EQ(e.level, child ? 0 : 1) << e.offset;
    EXPECT_TRUE(e.file.ends_with(child ? "child.vhd" : "base.vhd")) << e.file;
  }
  EXPECT_EQ(map->extents[3].length, 512u);
  EXPECT_EQ(end, size_);
  const std::vector<ChainImage> images = BackingChain("vhd+file:" + child_, **chain);
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0].device, chain->get());
  EXPECT_TRUE(images[1].spec.starts_with("vhd+file:") && images[1].spec.ends_with("base.vhd"))
      << images[1].spec;

  auto flat = OpenImage(base_, {.read_only = true});
  ASSERT_OK(flat);
  auto plain = MapImage(**flat);
  ASSERT_OK(plain);
  EXPECT_FALSE(plain->chain);
  EXPECT_EQ(BackingChain("x", **flat).size(), 1u);
}

}  // namespace
}  // namespace vstack
