// The image tooling as library calls (imagetools/): CopyImage, ConvertImage, CompareImages,
// CheckImage, NewImageFile and the JSON documents of info and check, called directly, as a
// program linking vstack would.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "imagetools/check.h"
#include "imagetools/compare.h"
#include "imagetools/convert.h"
#include "imagetools/info.h"
#include "imagetools/new_image_file.h"
#include "lib/aligned_buffer.h"
#include "lib/new_file.h"
#include "lib/property.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"

namespace vstack {
namespace {

constexpr uint64_t kSize = 8 << 20;

DevicePtr OpenOrDie(const std::string& spec) {
  auto d = OpenImage(spec);
  EXPECT_TRUE(d) << d.error().ToString();
  return d ? std::move(*d) : nullptr;
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void Fill(BlockDevice& d, uint64_t offset, uint64_t length, uint8_t value) {
  std::vector<std::byte> buf(length, std::byte{value});
  SyncIo io(d);
  ASSERT_FALSE(io.Write(offset, buf));
}

// A source with data at 0 (4 KiB), 3 MiB + 512 (8 KiB) and the last 4 KiB; zeros elsewhere.
DevicePtr Source() {
  DevicePtr src = OpenOrDie("memory:8M");
  Fill(*src, 0, 4096, 0x11);
  Fill(*src, (3 << 20) + 512, 8192, 0x22);
  Fill(*src, kSize - 4096, 4096, 0x33);
  return src;
}

TEST(ImageTools, CopyImageOverwritesEverythingAndReportsProgress) {
  DevicePtr src = Source();
  DevicePtr dst = OpenOrDie("memory:16M");
  Fill(*dst, 0, 16 << 20, 0xff);  // stale content: the zero ranges must be written as zeros
  std::vector<uint64_t> seen;
  CopyOptions options;
  options.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_EQ(total, kSize);
    seen.push_back(done);
  };
  auto stats = CopyImage(*src, *dst, options);
  ASSERT_TRUE(stats) << stats.error().ToString();
  EXPECT_EQ(stats->copied, kSize);
  // Data grains only: 4 KiB, the three 4 KiB grains the 8 KiB run at +512 touches, 4 KiB.
  EXPECT_EQ(stats->written, 5 * 4096u);
  ASSERT_FALSE(seen.empty());
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(seen.back(), kSize);

  auto same = CompareImages(*src, *dst);  // the 8 MiB past the source still hold 0xff
  ASSERT_TRUE(same);
  EXPECT_FALSE(same->identical);
  EXPECT_EQ(same->first_difference, std::optional<uint64_t>(kSize));
  DevicePtr exact = OpenOrDie("memory:8M");
  Fill(*exact, 0, kSize, 0xff);
  ASSERT_TRUE(CopyImage(*src, *exact));
  auto c = CompareImages(*src, *exact);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->identical);
}

// A stop asked by the progress callback ends the copy, even one asked at the last chunk's
// report, or while zero chunks are skipped with no I/O (the copy went on to the end and the
// Python binding's convert() replaced the file before raising the callback's exception): a new
// file is removed, an existing one left as it was.
TEST(ImageTools, AStopAskedByTheProgressCallbackEndsTheCopyAndKeepsTheOldFile) {
  testing::TempDir dir;
  DevicePtr src = Source();
  const std::string out = dir.File("out.raw");
  { std::ofstream(out) << "keep me"; }
  for (const bool at_last : {false, true}) {
    std::atomic<bool> stop{false};
    uint64_t reports = 0;
    ConvertOptions options;
    options.overwrite = true;
    options.stop = &stop;
    options.progress = [&](uint64_t done, uint64_t total) {
      ++reports;
      if (!at_last || done == total) stop = true;
    };
    auto r = ConvertImage(*src, out, options);
    ASSERT_FALSE(r) << at_last;
    EXPECT_EQ(r.error().code, make_error_code(Errc::kCancelled));
    EXPECT_EQ(r.error().message.rfind("interrupted at offset ", 0), 0u) << r.error().message;
    if (!at_last) EXPECT_EQ(reports, 1u);
    struct stat st;
    ASSERT_EQ(::stat(out.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 7) << "untouched";
    EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"out.raw"});
  }
  // All zeros: every chunk skipped in one go, reported with no I/O between them.
  std::atomic<bool> stop{false};
  CopyOptions options;
  options.stop = &stop;
  options.progress = [&](uint64_t, uint64_t) { stop = true; };
  options.dst_reads_zero = true;
  DevicePtr zeros = OpenOrDie("memory:16M");
  DevicePtr dst = OpenOrDie("memory:16M");
  auto r = CopyImage(*zeros, *dst, options);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "interrupted at offset 2097152 of 16777216");
}

TEST(ImageTools, CopyImageRefusesASmallerDestination) {
  DevicePtr src = Source();
  DevicePtr dst = OpenOrDie("memory:4M");
  auto r = CopyImage(*src, *dst);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, make_error_code(Errc::kOutOfRange));
  EXPECT_NE(r.error().message.find("smaller than the source"), std::string::npos);
}

TEST(ImageTools, ConvertImageMakesANewVhdThatReadsTheSame) {
  testing::TempDir dir;
  DevicePtr src = Source();
  const std::string out = dir.File("out.vhd");
  ConvertOptions options;
  options.format = "vhd";
  options.create_options = "block_size=1M";
  auto stats = ConvertImage(*src, out, options);
  ASSERT_TRUE(stats) << stats.error().ToString();
  std::string spec;
  auto dst = OpenImage(out, {.read_only = true}, &spec);
  ASSERT_TRUE(dst) << dst.error().ToString();
  EXPECT_EQ(spec, "vhd+file:" + out);
  auto c = CompareImages(*src, **dst);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->identical);
  // Zero ranges stayed holes: only the three 1 MiB blocks holding data are allocated.
  std::vector<Extent> ext;
  ASSERT_TRUE((*dst)->MapExtents(0, kSize, &ext));
  uint64_t allocated = 0;
  for (const Extent& e : ext) {
    if ((e.flags & kExtentHole) == 0) allocated += e.length;
  }
  EXPECT_EQ(allocated, 3u << 20);
}

// A source whose size is not a multiple of the destination's sector (4,608 bytes into a VHDX
// of 4 KiB sectors, which is created 8,192 bytes): the last chunk is whole sectors, the
// source's bytes then zeros. It failed ("writing the destination at offset 0 failed: offset
// or length is not a multiple of the logical block size").
TEST(ImageTools, ConvertIntoLargerSectorsEndsWithZerosAfterTheSource) {
  testing::TempDir dir;
  for (uint64_t size : {uint64_t{4608}, (uint64_t{2} << 20) + 512, (uint64_t{5} << 20) + 1536}) {
    SCOPED_TRACE(size);
    const std::string raw = dir.File("src.raw"), out = dir.File("out.vhdx");
    std::vector<unsigned char> bytes(size);
    testing::Rng rng(size);
    rng.Fill(bytes.data(), bytes.size());
    std::ofstream(raw, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), size);
    auto src = Open("file:" + raw, {.read_only = true});
    ASSERT_TRUE(src) << src.error().ToString();
    ConvertOptions options;
    options.format = "vhdx";
    options.create_options = "logical_sector_size=4096";
    options.overwrite = true;
    auto stats = ConvertImage(**src, out, options);
    ASSERT_TRUE(stats) << stats.error().ToString();
    EXPECT_EQ(stats->copied, size);
    auto dst = OpenImage(out, {.read_only = true});
    ASSERT_TRUE(dst) << dst.error().ToString();
    ASSERT_EQ((*dst)->size_bytes(), (size + 4095) / 4096 * 4096);
    SyncIo io(**dst);
    AlignedBuffer back((*dst)->size_bytes());
    ASSERT_FALSE(io.Read(0, back.span()));
    const auto* got = reinterpret_cast<const unsigned char*>(back.data());
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), got)) << "the source's bytes";
    EXPECT_TRUE(std::all_of(got + size, got + back.size(), [](unsigned char c) { return c == 0; }))
        << "zeros after them";
  }
}

// A new differencing VHD (backing_file=) reads its parent where nothing is written, so the
// source's zeros must be written into it: they were skipped as for a new image without a
// parent, and the parent's data showed through them.
TEST(ImageTools, ConvertImageIntoAChildWritesTheSourcesZerosOverItsParent) {
  testing::TempDir dir;
  DevicePtr src = Source();
  const std::string base = dir.File("base.vhd"), out = dir.File("child.vhd");
  {
    ConvertOptions o;
    o.format = "vhd";
    DevicePtr ones = OpenOrDie("memory:8M");
    Fill(*ones, 0, kSize, 0xEE);
    ASSERT_OK(ConvertImage(*ones, base, o));
  }
  ConvertOptions options;
  options.format = "vhd";
  options.create_options = "backing_file=" + base;
  ASSERT_OK(ConvertImage(*src, out, options));
  auto dst = OpenImage(out, {.read_only = true});
  ASSERT_OK(dst);
  auto c = CompareImages(*src, **dst);
  ASSERT_OK(c);
  EXPECT_TRUE(c->identical) << "first difference at offset " << c->first_difference.value_or(0);
}

TEST(ImageTools, ConvertImageKeepsAnExistingFileUnlessToldToReplaceIt) {
  testing::TempDir dir;
  DevicePtr src = Source();
  const std::string out = dir.File("out.raw");
  { std::ofstream(out) << "keep me"; }
  auto refused = ConvertImage(*src, out);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code.value(), EEXIST);
  auto bad =
      ConvertImage(*src, out, {.format = "vhd", .create_options = "colour=red", .overwrite = true});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, make_error_code(Errc::kInvalidArgument));
  struct stat st;
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 7);  // untouched, and no temporary file left beside it
  EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"out.raw"});
  ASSERT_TRUE(ConvertImage(*src, out, {.overwrite = true}));
  DevicePtr dst = OpenOrDie(out);
  EXPECT_TRUE(CompareImages(*src, *dst)->identical);
}

// The replaced file's mode and owner carry over (a 0600 image came back 0644: world-readable),
// and a file another process has open (its lock held, as by a qemu guest) is not replaced: the
// process would go on writing into the old inode and lose its writes.
TEST(ImageTools, ConvertImageReplacesAFileKeepingItsModeButNotOneInUse) {
  testing::TempDir dir;
  DevicePtr src = Source();
  const std::string out = dir.File("out.raw");
  { std::ofstream(out) << "keep me"; }
  ASSERT_EQ(::chmod(out.c_str(), 0600), 0);
  {
    auto holder = Open("file:" + out);  // holds the write lock
    ASSERT_OK(holder);
    auto refused = ConvertImage(*src, out, {.overwrite = true});
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("in use by this process"), std::string::npos)
        << refused.error().message;
    EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"out.raw"});
  }
  struct stat st;
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 7) << "untouched";
  ASSERT_TRUE(ConvertImage(*src, out, {.overwrite = true}));
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  DevicePtr dst = OpenOrDie(out);
  EXPECT_TRUE(CompareImages(*src, *dst)->identical);
}

// A convert that fills the disk said only "writing the destination at offset N failed: No
// space left on device", and the user went looking for a partial image. The new file is
// removed and a file --overwrite would have replaced stays: the error says which.
TEST(ImageTools, AConvertThatFailsSaysTheNewFileWasRemovedOrTheOldOneKept) {
  testing::TempDir dir;
  const std::string mount = dir.File("fs");
  testing::SmallFilesystem fs(mount, "4m");
  if (!fs.mounted()) GTEST_SKIP() << "mounting a tmpfs is not permitted here (CI runs as root)";
  DevicePtr src = OpenOrDie("memory:8M");
  std::vector<std::byte> bytes(8 << 20);
  testing::Rng rng(8);
  rng.Fill(bytes.data(), bytes.size());
  ASSERT_FALSE(SyncIo(*src).Write(0, bytes));
  const std::string dst = mount + "/d.raw";
  auto full = ConvertImage(*src, dst, {});
  ASSERT_FALSE(full) << "8 MiB fit in a 4 MiB filesystem";
  EXPECT_NE(full.error().message.find("No space left on device"), std::string::npos)
      << full.error().message;
  EXPECT_NE(full.error().message.find("the new file '" + dst + "' was removed"), std::string::npos)
      << full.error().message;
  EXPECT_FALSE(std::filesystem::exists(dst));
  std::ofstream(dst) << "keep me";
  ConvertOptions overwrite;
  overwrite.overwrite = true;
  auto kept = ConvertImage(*src, dst, overwrite);
  ASSERT_FALSE(kept);
  EXPECT_NE(kept.error().message.find("'" + dst + "' is left as it was"), std::string::npos)
      << kept.error().message;
  EXPECT_EQ(std::filesystem::file_size(dst), 7u);
  EXPECT_EQ(Names(mount), std::vector<std::string>{"d.raw"});
}

// A source larger than the format can hold (3 TiB into a dynamic VHD, at most 2040 GiB) was
// refused with the size check of create's command line (Errc::kBadSpec): `vstack convert`
// exited 2 with "Try `vstack help convert` for usage.", though nothing on the command line was
// wrong (qemu-img convert exits 1). It is the source the format cannot take.
TEST(ImageTools, ASourceTooLargeForTheFormatIsNotAUsageError) {
  testing::TempDir dir;
  DevicePtr src = OpenOrDie("null:3T");
  ConvertOptions options;
  options.format = "vhd";
  auto r = ConvertImage(*src, dir.File("big.vhd"), options);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, make_error_code(Errc::kNotSupported)) << r.error().message;
  EXPECT_NE(r.error().message.find("the source (3298534883328 bytes) cannot be converted to vhd"),
            std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("2040 GiB"), std::string::npos) << r.error().message;
  EXPECT_TRUE(Names(dir.path()).empty());
  testing::CommandResult cli = testing::RunVstack("convert -O vhd null:3T " + dir.File("big.vhd"));
  EXPECT_EQ(cli.status, 1) << cli.output;
  EXPECT_EQ(cli.output.find("Try `vstack help"), std::string::npos) << cli.output;
  // create's size is on the command line: a usage error there, as before.
  EXPECT_EQ(testing::RunVstack("create -f vhd " + dir.File("big.vhd") + " 3T").status, 2);
}

TEST(ImageTools, ConvertImageIntoAStackSpecWritesItAsItIs) {
  testing::TempDir dir;
  DevicePtr src = Source();
  const std::string raw = dir.File("disk.raw");
  ASSERT_TRUE(CreateImage("raw", raw, 16 << 20));
  auto r = ConvertImage(*src, "file:" + raw);
  ASSERT_TRUE(r) << r.error().ToString();
  DevicePtr dst = OpenOrDie(raw);
  auto c = CompareImages(*src, *dst);  // 16 MiB against 8: the tail reads as zeros
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->identical);
  EXPECT_TRUE(c->size_mismatch());
  auto with_format = ConvertImage(*src, "file:" + raw, {.format = "vhd"});
  ASSERT_FALSE(with_format);
  EXPECT_EQ(with_format.error().code, make_error_code(Errc::kInvalidArgument));
}

// A path with a NUL byte was cut short by the C library, and another file used: CreateImage
// made "b.raw" for "b.raw\0.evil", OpenImage opened "a.raw" for "a.raw\0junk". Every entry
// point that takes a path refuses it, creating and opening nothing.
TEST(ImageTools, APathOrSpecWithANulByteIsRefusedAndNoOtherFileUsed) {
  using namespace std::string_literals;
  testing::TempDir dir;
  const std::string a = dir.File("a.raw");
  ASSERT_TRUE(CreateImage("raw", a, 1 << 20));
  const std::string evil = dir.File("b.raw") + "\0.evil"s;
  const std::string at = " at position " + std::to_string(evil.find('\0'));
  auto expect_path_refused = [&](const Status& s, const char* call) {
    ASSERT_FALSE(s) << call;
    EXPECT_EQ(s.error().code, make_error_code(Errc::kInvalidArgument)) << call;
    EXPECT_EQ(s.error().message, "the path contains a NUL byte" + at) << call;
  };
  expect_path_refused(CreateImage("raw", evil, 1 << 20), "CreateImage");
  expect_path_refused(CreateImage("raw", evil, 0), "CreateImage of size 0");
  expect_path_refused(CreateImage("vhd", evil, 1 << 20), "CreateImage vhd");
  expect_path_refused(Status(CreateAndOpenImage("raw", evil, 1 << 20).error()), "CreateAndOpen");
  expect_path_refused(Status(CreateNewFile(evil, 1 << 20).error()), "CreateNewFile");
  expect_path_refused(Status(NewImageFile::Create(evil, "raw", 1 << 20).error()), "NewImageFile");
  DevicePtr src = Source();
  expect_path_refused(Status(ConvertImage(*src, evil).error()), "ConvertImage");
  Status options = CreateImage("vhd", dir.File("c.vhd"), 1 << 20, "subformat=fixed\0x"s);
  ASSERT_FALSE(options);
  EXPECT_EQ(options.error().message,
            "the create options string contains a NUL byte at position 15");
  EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"a.raw"});

  auto opened = OpenImage(a + "\0junk"s);
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, make_error_code(Errc::kInvalidArgument));
  EXPECT_EQ(opened.error().message,
            "the path contains a NUL byte at position " + std::to_string(a.size()));
  auto checked = CheckImage(a + "\0junk"s, CheckMode::kReadOnly);
  ASSERT_FALSE(checked);
  EXPECT_EQ(checked.error().code, make_error_code(Errc::kInvalidArgument));
  // A spec is named a spec: "file:x.raw" before the NUL would have created x.raw.
  const std::string spec = "file:" + dir.File("x.raw") + "\0junk,create=on,size=1M"s;
  auto created = OpenImage(spec);
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, make_error_code(Errc::kBadSpec));
  EXPECT_EQ(created.error().message,
            "the spec contains a NUL byte at position " + std::to_string(spec.find('\0')));
  EXPECT_FALSE(Open(spec));
  EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"a.raw"});
}

TEST(ImageTools, CompareImagesFindsTheFirstDifferentSector) {
  DevicePtr a = Source();
  DevicePtr b = Source();
  Fill(*b, (5 << 20) + 1024, 512, 0x01);
  auto c = CompareImages(*a, *b);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->identical);
  EXPECT_EQ(c->first_difference, std::optional<uint64_t>((5 << 20) + 1024));

  DevicePtr longer = OpenOrDie("memory:9M");
  ASSERT_TRUE(CopyImage(*a, *longer));
  EXPECT_TRUE(CompareImages(*a, *longer)->identical);
  auto strict = CompareImages(*a, *longer, {.strict = true});
  ASSERT_TRUE(strict);
  EXPECT_FALSE(strict->identical);
  EXPECT_FALSE(strict->first_difference);
  Fill(*longer, kSize + 4096, 512, 0x44);
  EXPECT_EQ(CompareImages(*longer, *a)->first_difference, std::optional<uint64_t>(kSize + 4096));
}

// Two disks of different logical blocks (a VHDX of 4 KiB sectors converted from a VHD of
// 512-byte ones, so rounded up to 4 KiB): their common part ends inside the larger-sector disk's
// last block, and its extra part starts there. Compare read that last chunk, and the extra
// part, unaligned for the 4 KiB disk and failed ("offset or length is not a multiple of the
// logical block size", exit 2); it must read whole blocks and compare the bytes asked.
TEST(ImageTools, CompareImagesOfDifferentSectorSizesReadsWholeBlocks) {
  constexpr uint64_t kSmall = 34816, kLarge = 36864;  // 68 sectors; 9 blocks of 4 KiB
  for (const bool large_first : {false, true}) {
    SCOPED_TRACE(large_first);
    DevicePtr small = OpenOrDie("memory:34K");
    DevicePtr large = OpenOrDie("memory:36K,block=4096");
    std::vector<std::byte> bytes(kSmall);
    testing::Rng rng(kSmall);
    rng.Fill(bytes.data(), bytes.size());
    {
      SyncIo a(*small), b(*large);
      ASSERT_FALSE(a.Write(0, bytes));
      std::vector<std::byte> padded(kLarge);
      std::copy(bytes.begin(), bytes.end(), padded.begin());
      ASSERT_FALSE(b.Write(0, padded));
    }
    auto compare = [&] {
      return large_first ? CompareImages(*large, *small) : CompareImages(*small, *large);
    };
    auto same = compare();
    ASSERT_TRUE(same) << same.error().ToString();
    EXPECT_TRUE(same->identical);
    EXPECT_TRUE(same->size_mismatch());

    Fill(*small, kSmall - 512, 512, 0x5a);  // the last sector of the common part differs
    auto last = compare();
    ASSERT_TRUE(last) << last.error().ToString();
    EXPECT_EQ(last->first_difference, std::optional<uint64_t>(kSmall - 512));

    {
      SyncIo a(*small);
      ASSERT_FALSE(a.Write(kSmall - 2048, std::span(bytes).subspan(kSmall - 2048)));
    }
    std::vector<std::byte> block(4096);
    std::copy(bytes.end() - 2048, bytes.end(), block.begin());
    block[2048 + 1024] = std::byte{1};  // past the small disk's end: must be zeros
    {
      SyncIo b(*large);
      ASSERT_FALSE(b.Write(32768, block));
    }
    auto extra = compare();
    ASSERT_TRUE(extra) << extra.error().ToString();
    EXPECT_EQ(extra->first_difference, std::optional<uint64_t>(kSmall + 1024));
  }
}

uint64_t DataOffset(BlockDevice& d) {
  PropertyList props;
  d.Properties(props);
  for (const Property& p : props) {
    if (p.key == "data_offset") return std::get<uint64_t>(p.value);
  }
  ADD_FAILURE() << "no data_offset";
  return 0;
}

// Overwrites `length` bytes of the file at `path` from `offset` with `byte`.
void Scribble(const std::string& path, uint64_t offset, uint64_t length, char byte) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  const std::string bytes(length, byte);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

// A read that fails is named by the lowest offset that fails, not by the start of the chunk
// being read (compare reads 1 MiB at a time, convert 2 MiB here): on a crc32c image with one
// byte changed in its grain at 3 MiB + 20 KiB, compare named 3 MiB and convert 2 MiB.
TEST(ImageTools, ACompareOrCopyThatFailsToReadNamesTheBadGrain) {
  testing::TempDir dir;
  const std::string path = dir.File("c.img");
  testing::Rng rng(7);
  const AlignedBuffer data = testing::RandomBuffer(rng, 4 << 20);
  constexpr uint64_t kBad = (3 << 20) + 5 * 4096;
  DevicePtr good = OpenOrDie("memory:4M");
  ASSERT_FALSE(SyncIo(*good).Write(0, data.span()));
  uint64_t data_offset = 0;
  {
    DevicePtr img = OpenOrDie("crc32c+file:" + path + ",create=on,size=8M");
    data_offset = DataOffset(*img);
    ASSERT_FALSE(SyncIo(*img).Write(0, data.span()));
    ASSERT_TRUE(img->Close());
  }
  ASSERT_NO_FATAL_FAILURE(Scribble(path, data_offset + kBad + 100, 1, '\x5a'));
  DevicePtr bad = OpenOrDie("crc32c+file:" + path);
  const std::string at = "at offset " + std::to_string(kBad);
  for (const bool bad_first : {true, false}) {
    auto c = bad_first ? CompareImages(*bad, *good) : CompareImages(*good, *bad);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code, make_error_code(Errc::kChecksumMismatch));
    EXPECT_EQ(c.error().message, "read error " + at + ": checksum mismatch");
  }
  DevicePtr copy = OpenOrDie("memory:8M");
  auto r = CopyImage(*bad, *copy);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, make_error_code(Errc::kChecksumMismatch));
  EXPECT_EQ(r.error().message, "reading the source " + at + " failed: checksum mismatch");
}

// A zstd image whose one data fragment (virtual offset 20 KiB, the only grain written) is
// overwritten: compare and copy name its offset, not 0 (the chunk's start).
TEST(ImageTools, ACompareOrCopyNamesAZstdFragmentThatDoesNotDecompress) {
  testing::TempDir dir;
  const std::string path = dir.File("z.img");
  constexpr uint64_t kGrain = 5 * 4096;
  DevicePtr good = OpenOrDie("memory:1M");
  Fill(*good, kGrain, 4096, 0x61);  // compresses to a few bytes: a fragment at the first bin
  uint64_t data_offset = 0;
  {
    DevicePtr img = OpenOrDie("zstd:size=1M+file:" + path + ",create=on,size=4M");
    data_offset = DataOffset(*img);
    Fill(*img, kGrain, 4096, 0x61);
    ASSERT_TRUE(img->Close());
  }
  ASSERT_NO_FATAL_FAILURE(Scribble(path, data_offset, 512, '\xff'));
  DevicePtr bad = OpenOrDie("zstd+file:" + path);
  const std::string at = "at offset " + std::to_string(kGrain);
  auto c = CompareImages(*bad, *good);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, make_error_code(Errc::kCorruption));
  EXPECT_EQ(c.error().message, "read error " + at + ": on-disk data or metadata is corrupt");
  DevicePtr copy = OpenOrDie("memory:1M");
  auto r = CopyImage(*bad, *copy);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "reading the source " + at + " failed: on-disk data or metadata is corrupt");
}

TEST(ImageTools, CheckImageChecksEveryLayerTopToBottom) {
  testing::TempDir dir;
  const std::string path = dir.File("disk.vhd");
  ASSERT_TRUE(CreateImage("vhd", path, 8 << 20));
  auto check = CheckImage(path);
  ASSERT_TRUE(check) << check.error().ToString();
  EXPECT_EQ(check->spec, "vhd+file:" + path);
  ASSERT_EQ(check->layers.size(), 2u);
  EXPECT_EQ(check->layers[0].kind, "vhd");
  EXPECT_EQ(check->layers[1].kind, "file");
  EXPECT_TRUE(check->clean());
  EXPECT_EQ(check->exit_code(), 0);
  const auto json = nlohmann::json::parse(CheckJson(*check));
  EXPECT_EQ(json["status"], "clean");
  EXPECT_EQ(json["layers"][0]["kind"], "vhd");
  EXPECT_FALSE(json.contains("open_error"));
  EXPECT_FALSE(CheckImage(dir.File("missing.vhd")));
}

TEST(ImageTools, InfoJsonDescribesEveryLayerAndWithStatsCountsItsRequests) {
  DevicePtr dev = OpenOrDie("dedup:size=8M+memory:16M");
  Fill(*dev, 0, 8192, 0x11);
  const auto plain = nlohmann::json::parse(InfoJson("dedup:size=8M+memory:16M", *dev));
  EXPECT_EQ(plain["spec"], "dedup:size=8M+memory:16M");
  EXPECT_EQ(plain["geometry"]["size_bytes"], 8 << 20);
  ASSERT_EQ(plain["layers"].size(), 2u);
  EXPECT_EQ(plain["layers"][0]["kind"], "dedup");
  EXPECT_EQ(plain["layers"][1]["kind"], "memory");
  EXPECT_FALSE(plain["layers"][0].contains("stats"));
  EXPECT_GT(plain["layers"][0]["properties"]["space_unique_grains"], 0);
  const auto stats =
      nlohmann::json::parse(InfoJson("dedup:size=8M+memory:16M", *dev, {.stats = true}));
  EXPECT_EQ(stats["layers"][0]["stats"]["ops"]["write"]["ops"], 1);
  EXPECT_EQ(stats["layers"][0]["stats"]["ops"]["write"]["bytes"], 8192);
  EXPECT_EQ(stats["layers"][0]["stats"]["counters"]["dedup_hits"], 1);  // two equal grains
  auto without = stats;
  for (auto& layer : without["layers"]) layer.erase("stats");
  EXPECT_EQ(without, plain);
}

// Issue 11 item 8: a new image is written through the descriptor that created it (O_EXCL), never
// reopened by path, so a symlink swapped in at the path cannot redirect the writes.

TEST(NewImage, TheFileBackendCreatesExclusivelyAndNeverFollowsALink) {
  testing::TempDir dir;
  const std::string victim = dir.File("victim"), link = dir.File("link");
  { std::ofstream(victim) << "precious"; }
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  ASSERT_EQ(::symlink(dir.File("nowhere").c_str(), dir.File("dangling").c_str()), 0);
  for (const std::string& path : {victim, link, dir.File("dangling")}) {
    auto r = Open("file:" + path + ",create=on,excl=on,size=1M");
    ASSERT_FALSE(r) << path;
    EXPECT_EQ(r.error().code.value(), EEXIST) << r.error().ToString();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.File("nowhere")));
  struct stat st;
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8);
  EXPECT_FALSE(Open("file:" + dir.File("x") + ",excl=on,size=1M"));  // excl needs create
}

// A format whose create hook swaps a symlink in at the path right after creating the file, as
// an attacker racing the tool would: the window between creating and writing.
std::string g_victim;
ComponentInfo SwappingFormat() {
  ComponentInfo c;
  c.name = "swapped_raw_test";
  c.kind = ComponentKind::kLayer;
  c.summary = "test only: raw, with a symlink swapped in at the path after creating it";
  c.open_layer = [](DevicePtr lower, const OptionValues&, const OpenOptions&) -> Result<DevicePtr> {
    return lower;
  };
  c.create = [](const std::string& path, uint64_t size, const OptionValues&) -> Result<DevicePtr> {
    VSTACK_ASSIGN_OR_RETURN(
        DevicePtr file, Open("file:" + path + ",create=on,excl=on,size=" + std::to_string(size)));
    if (::rename(path.c_str(), (path + ".created").c_str()) != 0 ||
        ::symlink(g_victim.c_str(), path.c_str()) != 0) {
      return MakeError(SystemError(errno), "swap failed");
    }
    return file;
  };
  return c;
}
VSTACK_REGISTER_COMPONENT(swapped_raw_test, SwappingFormat());

TEST(NewImage, WritesGoToTheCreatedFileEvenIfThePathIsSwapped) {
  testing::TempDir dir;
  g_victim = dir.File("victim");
  { std::ofstream(g_victim) << std::string(4096, 'v'); }
  const std::string path = dir.File("new.img");
  auto image = NewImageFile::Create(path, "swapped_raw_test", 1 << 20);
  ASSERT_TRUE(image) << image.error().ToString();
  Fill(image->device(), 0, 4096, 0x5a);
  ASSERT_TRUE(image->Commit());
  // The victim the path now points to is untouched; the file created holds the data.
  std::ifstream victim(g_victim);
  EXPECT_TRUE(std::string(std::istreambuf_iterator<char>(victim), {}) == std::string(4096, 'v'))
      << "the file the swapped-in symlink points to was written";
  std::ifstream created(path + ".created");
  const std::string data(std::istreambuf_iterator<char>(created), {});
  ASSERT_GE(data.size(), 4096u);
  EXPECT_TRUE(data.substr(0, 4096) == std::string(4096, '\x5a'))
      << "the created file did not receive the writes";
}

TEST(NewImage, ConvertWritesTheVhdItCreated) {
  testing::TempDir dir;
  DevicePtr src = Source();
  const std::string path = dir.File("out.vhd");
  auto image = NewImageFile::Create(path, "vhd", kSize);
  ASSERT_TRUE(image) << image.error().ToString();
  struct stat created;
  ASSERT_EQ(::stat(path.c_str(), &created), 0);
  // Move the new file away and put another file at its path before the copy.
  ASSERT_EQ(::rename(path.c_str(), dir.File("moved.vhd").c_str()), 0);
  { std::ofstream(path) << "someone else's"; }
  ASSERT_TRUE(CopyImage(*src, image->device(), {.dst_reads_zero = true}));
  ASSERT_TRUE(image->Commit());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 14);
  ASSERT_EQ(::stat(dir.File("moved.vhd").c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, created.st_ino);
  DevicePtr moved = OpenOrDie(dir.File("moved.vhd"));
  EXPECT_TRUE(CompareImages(*src, *moved)->identical);
}

}  // namespace
}  // namespace vstack
