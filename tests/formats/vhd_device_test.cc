// The vhd layer's behaviour: it joins the conformance suite (fixed and dynamic, several block
// sizes, over memory and over file/uring with reopen), and these tests check what the suite
// cannot see: the on-disk result of writes (exact bitmaps, 4 KiB-aligned data, new space past
// every structure), I/O avoided (zero reads, unchanged bitmaps), group commit, footers, the
// size rule, and many threads at once.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "formats/vhd/vhd_bitmap.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/spec.h"
#include "lib/sync_io.h"
#include "tests/formats/vhd_test_util.h"
#include "tests/testing/conformance.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

ConformanceTarget MemoryTarget(std::string name, std::string options, uint64_t device_size) {
  ConformanceTarget t;
  t.name = std::move(name);
  t.open = [options, device_size](const std::string&) {
    return MemoryVhd(kConformanceSize, options, device_size);
  };
  return t;
}

ConformanceTarget FileTarget(std::string name, std::string backend, std::string options,
                             std::string backend_options = "") {
  const std::string spec = "vhd+" + backend + ":{dir}/t.vhd" + backend_options;
  return SpecTarget(std::move(name), spec, spec, [options](const std::string& dir) {
    ASSERT_OK(CreateImage("vhd", dir + "/t.vhd", kConformanceSize, options));
  });
}

VSTACK_CONFORMANCE_TARGETS(vhd,
                           {
                               MemoryTarget("vhd_fixed_memory", "subformat=fixed", 0),
                               MemoryTarget("vhd_dynamic_memory", "", 80 << 20),
                               MemoryTarget("vhd_dynamic_512k_memory", "block_size=512K", 80 << 20),
                               MemoryTarget("vhd_dynamic_4m_memory", "block_size=4M", 80 << 20),
                               FileTarget("vhd_fixed_file", "file", "subformat=fixed"),
                               FileTarget("vhd_dynamic_file", "file", ""),
                               FileTarget("vhd_dynamic_512k_uring", "uring", "block_size=512K"),
                               FileTarget("vhd_dynamic_uring_direct", "uring", "", ",direct=on"),
                           });

using vhd::kSectorSize;

std::string Q(const std::string& path) { return FormatSpecPart(SpecPart{"file", path, {}}); }

// Bytes of the BAT entry of `block` in an image file.
uint32_t BatEntry(const std::vector<unsigned char>& file, uint32_t block) {
  const uint64_t header = BE64(file, 16);
  return BE32(file, BE64(file, header + 16) + 4ull * block);
}

std::vector<unsigned char> Pattern(size_t len, unsigned char seed) {
  std::vector<unsigned char> v(len);
  for (size_t i = 0; i < len; ++i) v[i] = static_cast<unsigned char>(seed + i * 7 + i / 512);
  return v;
}

class VhdDevice : public ::testing::Test {
 protected:
  TempDir dir_;
};

TEST_F(VhdDevice, UnallocatedReadsAreZerosWithoutDeviceIo) {
  auto dev = MemoryVhd(64 << 20, "", 80 << 20);
  ASSERT_OK(dev);
  const uint64_t lower_reads = (*dev)->lower()->Stats().of(Op::kRead).ops;
  auto data = ReadBytes(**dev, 3 << 20, 5 << 20);  // crosses three blocks
  EXPECT_TRUE(IsZero(data.data(), data.size()));
  EXPECT_EQ((*dev)->lower()->Stats().of(Op::kRead).ops, lower_reads);
  EXPECT_EQ(Counter(**dev, "zero_filled_reads"), 3u) << "one per block piece";
  EXPECT_EQ(Counter(**dev, "bat_lookups"), 3u);
}

TEST_F(VhdDevice, FirstWriteAllocatesWithExactBitmapAndAlignedData) {
  const std::string path = dir_.File("a.vhd");
  auto dev = FileVhd(path, 64 << 20);
  ASSERT_OK(dev);
  const auto data = Pattern(8192, 1);
  WriteBytes(**dev, (2 << 20) + 3 * 512, data);  // block 1, sectors 3..18
  EXPECT_EQ(ReadBytes(**dev, (2 << 20) + 3 * 512, 8192), data);
  EXPECT_EQ(Counter(**dev, "allocations"), 1u);
  EXPECT_EQ(Counter(**dev, "alloc_commits"), 1u);
  EXPECT_EQ(Counter(**dev, "footer_writes"), 1u) << "the file grew once, with a FUA footer";
  EXPECT_EQ(Counter(**dev, "metadata_flushes"), 0u);
  ASSERT_OK((*dev)->Close());
  dev->reset();

  const auto file = ReadAll(path);
  EXPECT_EQ(BatEntry(file, 0), 0xFFFFFFFFu);
  const uint32_t e = BatEntry(file, 1);
  ASSERT_NE(e, 0xFFFFFFFFu);
  const uint64_t bitmap = uint64_t{e} * kSectorSize;
  EXPECT_EQ((bitmap + 512) % 4096, 0u) << "data area 4 KiB-aligned";
  EXPECT_GE(bitmap, 1536u + 512u) << "past the header and the 32-entry BAT";
  for (uint32_t s = 0; s < 4096; ++s) {
    EXPECT_EQ(vhd::TestBit(&file[bitmap], s), s >= 3 && s < 19) << "sector " << s;
  }
  EXPECT_EQ(std::memcmp(&file[bitmap + 512 + 3 * 512], data.data(), data.size()), 0);
  // The file ends with the footer right after the block, identical to the copy at offset 0.
  EXPECT_EQ(file.size(), bitmap + 512 + (2 << 20) + 512);
  EXPECT_EQ(std::memcmp(&file[file.size() - 512], file.data(), 512), 0);
}

TEST_F(VhdDevice, UnchangedAndFullBitmapsAreNotRewritten) {
  auto dev = FileVhd(dir_.File("b.vhd"), 64 << 20);
  ASSERT_OK(dev);
  const uint64_t opening_reads = (*dev)->lower()->Stats().of(Op::kRead).ops;
  const auto data = Pattern(4096, 2);
  WriteBytes(**dev, 0, data);
  const uint64_t after_alloc = Counter(**dev, "bitmap_writes");
  WriteBytes(**dev, 0, data);  // same sectors: bitmap unchanged
  EXPECT_EQ(Counter(**dev, "bitmap_writes"), after_alloc);
  WriteBytes(**dev, 4096, data);  // new sectors: one bitmap write
  EXPECT_EQ(Counter(**dev, "bitmap_writes"), after_alloc + 1);
  // Fill the block: afterwards no write into it touches its bitmap.
  WriteBytes(**dev, 0, Pattern(2 << 20, 3));
  const uint64_t full = Counter(**dev, "bitmap_writes");
  WriteBytes(**dev, 8192, data);
  WriteBytes(**dev, (2 << 20) - 4096, data);
  EXPECT_EQ(Counter(**dev, "bitmap_writes"), full);
  EXPECT_EQ((*dev)->lower()->Stats().of(Op::kRead).ops, opening_reads)
      << "no bitmap is ever read back: the allocating commit leaves it cached";
}

TEST_F(VhdDevice, ConcurrentAllocationsShareOneCommit) {
  auto dev = FileVhd(dir_.File("c.vhd"), 128 << 20);
  ASSERT_OK(dev);
  auto q = (*dev)->OpenQueue();
  ASSERT_OK(q);
  constexpr int kBlocks = 32;
  AlignedBuffer buf(4096 * kBlocks, 4096);
  for (int i = 0; i < kBlocks; ++i) std::memset(buf.data() + 4096 * i, i + 1, 4096);
  std::vector<iovec> iov(kBlocks);
  std::vector<IoRequest> reqs(kBlocks);
  for (int i = 0; i < kBlocks; ++i) {
    iov[i] = iovec{buf.data() + 4096 * i, 4096};
    reqs[i].op = Op::kWrite;
    reqs[i].offset = uint64_t(i) * (2 << 20) + 8192;
    reqs[i].length = 4096;
    reqs[i].iov = &iov[i];
    reqs[i].iovcnt = 1;
  }
  RunBatch(**q, reqs);
  for (auto& r : reqs) ASSERT_OK(r.status);
  (*q)->WaitIdle();
  q->reset();
  EXPECT_EQ(Counter(**dev, "allocations"), uint64_t{kBlocks});
  EXPECT_EQ(Counter(**dev, "alloc_commits"), 1u) << "one batch: one group commit";
  EXPECT_EQ(Counter(**dev, "footer_writes"), 1u);
  EXPECT_EQ(Counter(**dev, "metadata_flushes"), 0u);
  EXPECT_EQ(Counter(**dev, "bat_sector_writes"), 1u) << "64 entries share one BAT sector";
  for (int i = 0; i < kBlocks; ++i) {
    auto back = ReadBytes(**dev, uint64_t(i) * (2 << 20) + 8192, 4096);
    EXPECT_EQ(back[0], i + 1);
  }
}

// A dynamic disk with parent-locator data after its BAT (where differencing disks keep it):
// qemu allocates over it; new blocks must start past every structure.
TEST_F(VhdDevice, NewSpaceStartsPastEveryStructure) {
  const std::string path = dir_.File("loc.vhd");
  ASSERT_OK(CreateImage("vhd", path, 64 << 20, ""));
  auto file = ReadAll(path);
  const uint64_t footer_at = file.size() - 512;  // right after the BAT
  std::vector<unsigned char> footer(file.end() - 512, file.end());
  file.resize(footer_at);
  file.insert(file.end(), 1024, 0x4C);  // the locator's data
  file.insert(file.end(), footer.begin(), footer.end());
  const uint64_t loc = 512 + 576;
  PutBE32(file, loc, 0x57326B75);  // W2ku
  PutBE32(file, loc + 4, 1024);
  PutBE32(file, loc + 8, 10);
  PutBE64(file, loc + 16, footer_at);
  FixHeaderChecksum(file, 512);
  WriteAll(path, file);
  {
    auto dev = Open("vhd+" + Q(path));
    ASSERT_OK(dev);
    WriteBytes(**dev, 0, Pattern(4096, 4));
  }
  file = ReadAll(path);
  EXPECT_GE(uint64_t{BatEntry(file, 0)} * 512, footer_at + 1024);
  EXPECT_EQ(file[footer_at + 1023], 0x4C) << "the locator data is intact";
  auto r = RunVstack("check " + path);
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(VhdDevice, WriteZeroesNeverAllocates) {
  auto dev = MemoryVhd(64 << 20, "", 80 << 20);
  ASSERT_OK(dev);
  SyncIo io(**dev);
  ASSERT_OK(io.WriteZeroes(0, 8 << 20));
  EXPECT_EQ(Counter(**dev, "allocations"), 0u);
  WriteBytes(**dev, 4096, Pattern(8192, 5));
  ASSERT_OK(io.WriteZeroes(4096, 4096));
  auto back = ReadBytes(**dev, 0, 16384);
  auto want = std::vector<unsigned char>(16384, 0);
  auto p = Pattern(8192, 5);
  std::copy(p.begin() + 4096, p.end(), want.begin() + 8192);
  EXPECT_EQ(back, want);
  EXPECT_EQ(Counter(**dev, "allocations"), 1u);
}

TEST_F(VhdDevice, MapShowsHolesDataAndUnwrittenSectors) {
  auto dev = MemoryVhd(64 << 20, "", 80 << 20);
  ASSERT_OK(dev);
  WriteBytes(**dev, (4 << 20) + 4096, Pattern(4096, 6));
  std::vector<Extent> ext;
  ASSERT_OK((*dev)->MapExtents(0, 8 << 20, &ext));
  const std::vector<Extent> want = {{0, 4 << 20, kExtentHole | kExtentZero},
                                    {4 << 20, 4096, kExtentZero},
                                    {(4 << 20) + 4096, 4096, 0},
                                    {(4 << 20) + 8192, (2 << 20) - 8192, kExtentZero},
                                    {6 << 20, 2 << 20, kExtentHole | kExtentZero}};
  EXPECT_EQ(ext, want);
}

TEST_F(VhdDevice, OverAFixedSizeDeviceTheFooterStaysAndSpaceRunsOut) {
  // 8 MiB disk, 512 KiB blocks, room for only a few blocks before the footer.
  auto dev = MemoryVhd(8 << 20, "block_size=512K", 1 << 20);
  ASSERT_OK(dev);
  SyncIo io(**dev);
  AlignedBuffer buf(4096, 4096);
  std::error_code last;
  int written = 0;
  for (int b = 0; b < 16 && !last; ++b) {
    last = io.Write(uint64_t(b) * (512 << 10), buf.span());
    if (!last) ++written;
  }
  EXPECT_EQ(last, make_error_code(Errc::kNoSpace));
  EXPECT_EQ(written, 1) << "1 MiB holds the metadata and one 516 KiB block";
  CheckResult result;
  ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &result));
  EXPECT_EQ(result.corruptions, 0u);
  EXPECT_EQ(result.leaks, 0u) << "free space before the footer of a fixed-size device is no leak";
}

TEST_F(VhdDevice, LegacyShortFooterOpens) {
  const std::string path = dir_.File("short.vhd");
  ASSERT_OK(CreateImage("vhd", path, 1 << 20, "subformat=fixed,force_size=on"));
  auto file = ReadAll(path);
  std::fill(file.begin(), file.begin() + (1 << 20), 0x5A);
  file.pop_back();  // the last (reserved, zero) byte: a pre-2004 511-byte footer
  WriteAll(path, file);
  auto dev = OpenImage(path);
  ASSERT_OK(dev);
  EXPECT_EQ((*dev)->kind(), "vhd");
  EXPECT_EQ((*dev)->geometry().size_bytes, 1u << 20);
  EXPECT_EQ(ReadBytes(**dev, (1 << 20) - 512, 512), std::vector<unsigned char>(512, 0x5A));
}

TEST_F(VhdDevice, CorruptEndFooterFallsBackToTheCopyAndCheckRepairsIt) {
  const std::string path = dir_.File("nofoot.vhd");
  {
    auto dev = FileVhd(path, 32 << 20);
    ASSERT_OK(dev);
    WriteBytes(**dev, 0, Pattern(4096, 7));
  }
  const uint64_t size = FileSize(path);
  Patch(path, size - 512, std::vector<unsigned char>(512, 0xC7));  // tapdisk's "killed" footer
  {
    auto dev = OpenImage(path);
    ASSERT_OK(dev);
    PropertyList props;
    (*dev)->Properties(props);
    auto it = std::find_if(props.begin(), props.end(), [](auto& p) { return p.key == "footer"; });
    ASSERT_NE(it, props.end());
    EXPECT_EQ(std::get<std::string>(it->value), "copy at offset 0 (end footer unusable)");
    EXPECT_EQ(ReadBytes(**dev, 0, 4096), Pattern(4096, 7));
  }
  auto r = RunVstack("check " + path);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("no footer ('conectix' cookie) at offset " + std::to_string(size - 512)),
            std::string::npos)
      << r.output;
  r = RunVstack("check -r all " + path);
  EXPECT_EQ(r.status, 0) << r.output;
  auto file = ReadAll(path);
  EXPECT_EQ(std::memcmp(&file[file.size() - 512], file.data(), 512), 0);
  EXPECT_EQ(RunVstack("check " + path).status, 0);
}

TEST_F(VhdDevice, SizeRuleFollowsTheCreator) {
  const std::string path = dir_.File("rule.vhd");
  ASSERT_OK(CreateImage("vhd", path, (100 << 20) + 1536, "subformat=fixed,force_size=on"));
  auto file = ReadAll(path);
  const uint64_t f = file.size() - 512;
  // A Virtual PC image whose geometry (spec rounding) is smaller than current_size.
  file[f + 28] = 'v';
  file[f + 29] = 'p';
  file[f + 30] = 'c';
  file[f + 31] = ' ';
  file[f + 56] = 1003 >> 8;
  file[f + 57] = 1003 & 0xFF;
  file[f + 58] = 12;
  file[f + 59] = 17;
  FixFooterChecksum(file, f);
  WriteAll(path, file);
  auto size_of = [&](const std::string& spec) {
    auto d = Open(spec);
    EXPECT_TRUE(d.has_value()) << (d ? "" : d.error().message);
    return d ? (*d)->geometry().size_bytes : 0;
  };
  EXPECT_EQ(size_of("vhd+" + Q(path)), 104761344u) << "vpc: C*H*S";
  EXPECT_EQ(size_of("vhd:size_rule=current+" + Q(path)), 104859136u);
  file[f + 28] = 'w';
  file[f + 29] = 'i';
  file[f + 30] = 'n';
  file[f + 31] = ' ';
  FixFooterChecksum(file, f);
  WriteAll(path, file);
  EXPECT_EQ(size_of("vhd+" + Q(path)), 104859136u) << "win: current_size";
  EXPECT_EQ(size_of("vhd:size_rule=chs+" + Q(path)), 104761344u);
}

// With room for only a few cached bitmaps, idle ones are dropped and read back when a block is
// written or read again; data and bitmaps stay exact.
// A write whose bitmap write fails below has failed: its sectors may read old or new, but what
// reads back must not change at a clean close and reopen (a layer above, such as crc32c,
// recomputes checksums from what it reads, flushes, and trusts them from then on). The bits of
// the failed bitmap write stayed set in memory only: new data before the close, zeros after.
TEST_F(VhdDevice, AFailedBitmapWriteReadsTheSameBeforeAndAfterReopen) {
  const std::string path = dir_.File("f.vhd");
  {
    auto dev = FileVhd(path, 64 << 20);
    ASSERT_OK(dev);
    WriteBytes(**dev, 0, Pattern(4096, 1));  // block 0, sectors 0..7
    ASSERT_OK((*dev)->Close());
  }
  const uint32_t entry = BatEntry(ReadAll(path), 0);
  ASSERT_NE(entry, 0xFFFFFFFFu);
  const uint64_t bitmap = uint64_t{entry} * kSectorSize;
  for (const bool again : {false, true}) {  // a second write into the block after the failure
    SCOPED_TRACE(again ? "another write follows" : "nothing follows");
    const uint64_t at = again ? 64 << 10 : 8192;
    std::vector<unsigned char> seen;
    {
      // Reopened (the bitmap is loaded from disk), the block's next bitmap write fails once.
      auto dev = Open("vhd+error:ops=write,offset=" + std::to_string(bitmap) +
                      ",length=512,count=1+" + Q(path));
      ASSERT_OK(dev);
      {
        SyncIo io(**dev);
        const auto data = Pattern(4096, 9);
        EXPECT_TRUE(io.Write(at, std::as_bytes(std::span(data))));
        seen = ReadBytes(**dev, at, 4096);
        EXPECT_TRUE(seen == data || IsZero(seen.data(), seen.size()));
        if (again) WriteBytes(**dev, at + (1 << 20), Pattern(4096, 5));
        EXPECT_FALSE(io.Flush());
      }
      ASSERT_OK((*dev)->Close());
    }
    auto dev = Open("vhd+" + Q(path));
    ASSERT_OK(dev);
    EXPECT_EQ(ReadBytes(**dev, at, 4096), seen);
    CheckResult found;
    ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &found));
    EXPECT_EQ(found.corruptions, 0u);
    ASSERT_OK((*dev)->Close());
  }
}

// The failed-commit scenario of the next two tests: one 8 KiB write at 2 MiB - 4 KiB spans blocks
// 0 and 1 of a new 64 MiB dynamic image and allocates both in one commit; block 1's data write
// fails (it starts past block 0's 2 MiB data area), so the write fails and neither block is
// allocated. `more_errors` ("error:...+" or empty) sits between that error layer and the file.
// A write-zeroes to block 0 follows, then a flush and a close. After it, the BAT on disk must
// hold no entry for either block, and a reopen must read zeros, not the failed write's data.
void ExpectAFailedCommitLeavesNoBlock(const std::string& path, const std::string& more_errors) {
  const uint64_t at = (2 << 20) - 4096;
  {
    auto dev = Open("vhd+error:ops=write,offset=" + std::to_string((2 << 20) + 4096) +
                    ",length=1048576,count=1+" + more_errors + Q(path));
    ASSERT_OK(dev);
    {
      SyncIo io(**dev);
      const auto data = Pattern(8192, 3);
      EXPECT_TRUE(io.Write(at, std::as_bytes(std::span(data))));
      EXPECT_EQ(Counter(**dev, "allocations"), 2u);
      ASSERT_OK(io.WriteZeroes(at, 4096));
      ASSERT_OK(io.Flush());
    }
    ASSERT_OK((*dev)->Close());
  }
  EXPECT_EQ(BatEntry(ReadAll(path), 0), 0xFFFFFFFFu);
  EXPECT_EQ(BatEntry(ReadAll(path), 1), 0xFFFFFFFFu);
  auto dev = Open("vhd+" + Q(path));
  ASSERT_OK(dev);
  EXPECT_EQ(ReadBytes(**dev, at, 8192), std::vector<unsigned char>(8192, 0));
  ASSERT_OK((*dev)->Close());
}

TEST_F(VhdDevice, AFailedCommitLeavesNoBatEntryOnDisk) {
  // Block 0's data and bitmap and the shared BAT sector go down before the commit fails.
  const std::string path = dir_.File("f.vhd");
  ASSERT_OK(CreateImage("vhd", path, 64 << 20, ""));
  ExpectAFailedCommitLeavesNoBlock(path, "");
}

TEST_F(VhdDevice, AFailedCommitsBatUndoThatFailsTooIsRewrittenAtClose) {
  // As above, but the undo's rewrite of the BAT sector fails too, and no commit follows to
  // retry it: the close writes it as memory has it.
  const std::string path = dir_.File("g.vhd");
  ASSERT_OK(CreateImage("vhd", path, 64 << 20, ""));
  const std::vector<unsigned char> created = ReadAll(path);
  uint64_t bat = 0;  // the dynamic header's table offset (big-endian, at 512 + 16)
  for (int i = 0; i < 8; ++i) bat = bat << 8 | created[512 + 16 + i];
  // The first BAT write (the commit's) goes down; the second (its undo) fails.
  ExpectAFailedCommitLeavesNoBlock(
      path, "error:ops=write,offset=" + std::to_string(bat) + ",length=512,after=1,count=1+");
}

TEST_F(VhdDevice, BitmapCacheEvictsIdleBitmapsAndReloadsThem) {
  const std::string path = dir_.File("evict.vhd");
  ASSERT_OK(CreateImage("vhd", path, 32 << 20, "block_size=512K"));
  auto file = Open("file:" + path);
  ASSERT_OK(file);
  vhd::VhdOptions options;
  options.max_cached_bitmaps = 4;
  auto dev = vhd::VhdDevice::Open(std::move(*file), options);
  ASSERT_OK(dev);
  std::vector<unsigned char> model(32 << 20, 0);
  for (int pass = 0; pass < 3; ++pass) {
    for (uint64_t b = 0; b < 64; ++b) {  // one new 4 KiB piece in each block per pass
      const uint64_t off = b * (512 << 10) + uint64_t(pass) * 8192;
      const auto data = Pattern(4096, static_cast<unsigned char>(b + pass * 64));
      WriteBytes(**dev, off, data);
      std::copy(data.begin(), data.end(), model.begin() + off);
    }
  }
  EXPECT_GT(Counter(**dev, "bitmap_reads"), 64u) << "evicted bitmaps were read back";
  EXPECT_EQ(ReadBytes(**dev, 0, 32 << 20), model);
  ASSERT_OK((*dev)->Close());
  dev->reset();
  auto again = OpenImage(path);
  ASSERT_OK(again);
  EXPECT_EQ(ReadBytes(**again, 0, 32 << 20), model);
  std::vector<Extent> ext;
  ASSERT_OK((*again)->MapExtents(0, 512 << 10, &ext));
  EXPECT_EQ(ext[0], (Extent{0, 4096, 0})) << "exact bitmap: 4 KiB written, then a gap";
  EXPECT_EQ(ext[1], (Extent{4096, 4096, kExtentZero}));
}

// Four threads, each with its own queue, write 4 KiB pieces into the same few blocks (never
// the same sectors), so that allocations, bitmap updates and commits are shared between
// queues. Everything reads back, the image checks clean, and survives reopening.
TEST_F(VhdDevice, ManyQueuesShareBlocksAllocationsAndBitmaps) {
  const std::string path = dir_.File("mt.vhd");
  constexpr int kThreads = 4, kPerThread = 96, kDepth = 8;
  constexpr uint64_t kSize = 32 << 20;  // 16 blocks of 2 MiB
  std::vector<std::vector<uint64_t>> written_units(kThreads);  // per thread, what it wrote
  {
    auto dev = FileVhd(path, kSize);
    ASSERT_OK(dev);
    std::atomic<int> failures{0};
    auto worker = [&](int t) {
      auto q = (*dev)->OpenQueue();
      if (!q) {
        ++failures;
        return;
      }
      // Thread t owns the 4 KiB units u with u % kThreads == t.
      Rng rng(t + 1);
      for (int done = 0; done < kPerThread; done += kDepth) {
        AlignedBuffer buf(4096 * kDepth, 4096);
        std::vector<iovec> iov(kDepth);
        std::vector<IoRequest> reqs(kDepth);
        std::vector<uint64_t> units;
        for (int k = 0; k < kDepth; ++k) {
          uint64_t u;
          do {
            u = rng.Below(kSize / 4096 / kThreads) * kThreads + t;
          } while (std::find(written_units[t].begin(), written_units[t].end(), u) !=
                   written_units[t].end());
          units.push_back(u);
          written_units[t].push_back(u);
          std::memset(buf.data() + 4096 * k, static_cast<int>(u % 251 + 1), 4096);
          iov[k] = iovec{buf.data() + 4096 * k, 4096};
          reqs[k].op = Op::kWrite;
          reqs[k].offset = u * 4096;
          reqs[k].length = 4096;
          reqs[k].iov = &iov[k];
          reqs[k].iovcnt = 1;
        }
        RunBatch(**q, reqs);
        for (auto& r : reqs) {
          if (r.status) ++failures;
        }
      }
      (*q)->WaitIdle();
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(Counter(**dev, "allocations"), 16u) << "every block allocated exactly once";
  }
  // Read back exactly: every unit a thread wrote holds its pattern (no write may be lost to a
  // bitmap race), every other unit reads as zeros.
  std::vector<bool> wrote(kSize / 4096, false);
  uint64_t written = 0;
  for (const auto& units : written_units) {
    for (uint64_t u : units) {
      wrote[u] = true;
      ++written;
    }
  }
  ASSERT_EQ(written, uint64_t{kThreads} * kPerThread) << "every thread wrote distinct units";
  auto dev = OpenImage(path);
  ASSERT_OK(dev);
  auto all = ReadBytes(**dev, 0, kSize);
  uint64_t wrong = 0;
  for (uint64_t u = 0; u < kSize / 4096; ++u) {
    const unsigned char* p = &all[u * 4096];
    const unsigned char want = wrote[u] ? static_cast<unsigned char>(u % 251 + 1) : 0;
    if (std::count(p, p + 4096, want) != 4096) {
      ++wrong;
      ADD_FAILURE() << "unit " << u << (wrote[u] ? " (written)" : " (never written)") << " reads "
                    << int(p[0]);
      if (wrong > 10) break;
    }
  }
  dev->reset();
  auto r = RunVstack("check " + path);
  EXPECT_EQ(r.status, 0) << r.output;
}

}  // namespace
}  // namespace vstack::testing
