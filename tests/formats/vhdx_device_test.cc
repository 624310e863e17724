// The vhdx layer: it joins the conformance suite (fixed and dynamic, 512-byte and 4 KiB
// sectors, over memory and over file/uring with reopen), and these tests check what the suite
// cannot see: block states on disk, the log written for every allocation and left empty at
// close, replay of a dirty log (and its refusal read-only), and bad input.
#include "formats/vhdx/vhdx_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <variant>

#include "formats/vhdx/vhdx_format.h"
#include "formats/vhdx/vhdx_log.h"
#include "imagetools/compact.h"
#include "lib/endian.h"
#include "lib/iovec.h"
#include "lib/spec.h"
#include "lib/sync_io.h"
#include "tests/formats/vhd_test_util.h"
#include "tests/formats/vhdx_test_util.h"
#include "tests/testing/conformance.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

ConformanceTarget MemoryTarget(std::string name, std::string options, uint64_t device_size) {
  ConformanceTarget t;
  t.name = std::move(name);
  t.open = [options, device_size](const std::string&) {
    return MemoryVhdx(kConformanceSize, options, device_size);
  };
  return t;
}

ConformanceTarget FileTarget(std::string name, std::string backend, std::string options,
                             std::string backend_options = "") {
  const std::string spec = "vhdx+" + backend + ":{dir}/t.vhdx" + backend_options;
  return SpecTarget(std::move(name), spec, spec, [options](const std::string& dir) {
    ASSERT_OK(CreateImage("vhdx", dir + "/t.vhdx", kConformanceSize, options));
  });
}

VSTACK_CONFORMANCE_TARGETS(
    vhdx,
    {
        MemoryTarget("vhdx_fixed_memory", "subformat=fixed,block_size=1M", 0),
        MemoryTarget("vhdx_dynamic_memory", "block_size=1M", 80 << 20),
        MemoryTarget("vhdx_dynamic_4k_memory", "block_size=2M,logical_sector_size=4096", 80 << 20),
        FileTarget("vhdx_fixed_file", "file", "subformat=fixed,block_size=1M"),
        FileTarget("vhdx_dynamic_file", "file", "block_size=1M"),
        FileTarget("vhdx_dynamic_4k_file", "file", "logical_sector_size=4096"),
        FileTarget("vhdx_dynamic_uring_direct", "uring", "block_size=1M", ",direct=on"),
    });

std::vector<unsigned char> Pattern(size_t len, unsigned char seed) {
  std::vector<unsigned char> v(len);
  for (size_t i = 0; i < len; ++i) v[i] = static_cast<unsigned char>(seed + i * 7 + i / 512);
  return v;
}

std::string Q(const std::string& path) { return FormatSpecPart(SpecPart{"file", path, {}}); }

class Vhdx : public ::testing::Test {
 protected:
  TempDir dir_;
};

TEST_F(Vhdx, CreateWritesEveryStructureAndOpens) {
  const std::string path = dir_.File("a.vhdx");
  ASSERT_OK(CreateImage("vhdx", path, 10 << 20, "block_size=1M"));
  const auto file = ReadAll(path);
  ASSERT_EQ(std::memcmp(file.data(), "vhdxfile", 8), 0);
  EXPECT_EQ(std::memcmp(&file[64 << 10], "head", 4), 0);
  EXPECT_EQ(std::memcmp(&file[128 << 10], "head", 4), 0);
  EXPECT_EQ(std::memcmp(&file[192 << 10], "regi", 4), 0);
  EXPECT_EQ(std::memcmp(&file[256 << 10], "regi", 4), 0);
  EXPECT_EQ(VhdxBatEntry(file, 0), 0u) << "dynamic blocks start NOT_PRESENT";
  {
    auto dev = Open("vhdx+" + Q(path));
    ASSERT_OK(dev);
    EXPECT_EQ((*dev)->geometry().size_bytes, 10u << 20);
    EXPECT_EQ((*dev)->geometry().logical_block, 512u);
  }
  auto probed = OpenImage(path);
  ASSERT_OK(probed);
  EXPECT_EQ((*probed)->kind(), "vhdx");
}

TEST_F(Vhdx, FirstWriteAllocatesThroughTheLogAndCloseLeavesItEmpty) {
  const std::string path = dir_.File("a.vhdx");
  ASSERT_OK(CreateImage("vhdx", path, 16 << 20, "block_size=1M"));
  {
    auto dev = Open("vhdx+" + Q(path));
    ASSERT_OK(dev);
    const auto data = Pattern(8192, 3);
    WriteBytes(**dev, (3 << 20) + 4096, data);
    WriteBytes(**dev, (3 << 20) + 65536, data);  // same block: no new allocation
    EXPECT_EQ(ReadBytes(**dev, (3 << 20) + 4096, 8192), data);
    EXPECT_EQ(Counter(**dev, "allocations"), 1u);
    EXPECT_EQ(Counter(**dev, "log_entries"), 1u);
    EXPECT_EQ(Counter(**dev, "bat_page_writes"), 1u);
    const auto file = ReadAll(path);
    EXPECT_EQ(vhdx::EntryState(VhdxBatEntry(file, 3)), vhdx::kFullyPresent);
    EXPECT_EQ(vhdx::EntryOffset(VhdxBatEntry(file, 3)) % (1 << 20), 0u);
    ASSERT_OK((*dev)->Close());
  }
  // Closed cleanly: both headers carry a zero log GUID, so nothing is replayed.
  const auto file = ReadAll(path);
  for (uint64_t at : {64u << 10, 128u << 10}) {
    EXPECT_TRUE(
        std::all_of(&file[at + 48], &file[at + 64], [](unsigned char c) { return c == 0; }));
  }
  auto dev = Open("vhdx+" + Q(path), OpenOptions{.read_only = true});
  ASSERT_OK(dev);
  EXPECT_EQ(ReadBytes(**dev, (3 << 20) + 4096, 8192), Pattern(8192, 3));
  EXPECT_TRUE(IsZero(ReadBytes(**dev, 3 << 20, 4096).data(), 4096));
}

// Leaves an image whose BAT update is only in the log: the in-place BAT page is put back to
// what it was before, and the header still names the log.
std::string DirtyImage(const TempDir& dir, std::vector<unsigned char>* data) {
  const std::string path = dir.File("dirty.vhdx");
  EXPECT_OK(CreateImage("vhdx", path, 16 << 20, "block_size=1M"));
  const auto before = ReadAll(path);
  {
    auto dev = Open("vhdx+" + Q(path));
    EXPECT_OK(dev);
    *data = Pattern(4096, 9);
    WriteBytes(**dev, 5 << 20, *data);
    // Simulate a crash: copy the file before Close clears the log.
    const auto crashed = ReadAll(path);
    WriteAll(dir.File("crashed.vhdx"), crashed);
  }
  auto crashed = ReadAll(dir.File("crashed.vhdx"));
  // The BAT page in place as before the write: only the log knows the block.
  const uint64_t bat = 3 << 20;  // log 1M..2M, metadata 2M..3M, BAT at 3M
  std::memcpy(&crashed[bat], &before[bat], 4096);
  WriteAll(path, crashed);
  return path;
}

TEST_F(Vhdx, DirtyLogIsRefusedReadOnlyAndReplayedWritable) {
  std::vector<unsigned char> data;
  const std::string path = DirtyImage(dir_, &data);
  EXPECT_EQ(VhdxBatEntry(ReadAll(path), 5), 0u);
  auto ro = Open("vhdx+" + Q(path), OpenOptions{.read_only = true});
  ASSERT_FALSE(ro);
  EXPECT_NE(ro.error().message.find("replayed"), std::string::npos) << ro.error().message;
  {
    auto dev = Open("vhdx+" + Q(path));
    ASSERT_OK(dev);
    EXPECT_EQ(ReadBytes(**dev, 5 << 20, 4096), data);
    PropertyList props;
    (*dev)->Properties(props);
    for (const auto& p : props) {
      if (p.key == "log_entries_replayed") {
        EXPECT_EQ(PropertyValueToString(p.value), "1");
      }
    }
  }
  EXPECT_EQ(vhdx::EntryState(VhdxBatEntry(ReadAll(path), 5)), vhdx::kFullyPresent);
  auto again = Open("vhdx+" + Q(path), OpenOptions{.read_only = true});
  ASSERT_OK(again) << "the replay cleared the log";
}

TEST_F(Vhdx, LogWrapsAfterAFlushAndEveryBlockSurvives) {
  // 1 MiB log, 8 KiB per entry: 200 allocations wrap it; the layer flushes before reusing
  // space whose in-place writes are not known durable.
  const std::string path = dir_.File("w.vhdx");
  ASSERT_OK(CreateImage("vhdx", path, 200 << 20, "block_size=1M"));
  {
    auto dev = Open("vhdx+" + Q(path));
    ASSERT_OK(dev);
    for (uint64_t b = 0; b < 200; ++b)
      WriteBytes(**dev, b << 20, Pattern(512, static_cast<unsigned char>(b)));
    EXPECT_EQ(Counter(**dev, "log_entries"), 200u);
    EXPECT_GE(Counter(**dev, "log_flushes"), 1u);
  }
  auto dev = Open("vhdx+" + Q(path), OpenOptions{.read_only = true});
  ASSERT_OK(dev);
  for (uint64_t b = 0; b < 200; ++b) {
    ASSERT_EQ(ReadBytes(**dev, b << 20, 512), Pattern(512, static_cast<unsigned char>(b))) << b;
  }
}

TEST_F(Vhdx, ABatchOfAllocationsIsGroupCommittedInOneLogEntry) {
  // 50 writes submitted together: 40 new blocks whose entries share BAT page 0, three of them
  // written twice (one write reaching the block's end, one ending 1 KiB short of it), and 6
  // blocks in BAT page 1, the last of them (the file's new end) written twice too, ending 1 KiB
  // short of its end: the zeros that carry the file's length must not overlap that write.
  const std::string path = dir_.File("g.vhdx");
  ASSERT_OK(CreateImage("vhdx", path, 600 << 20, "block_size=1M"));
  std::vector<std::pair<uint64_t, uint64_t>> writes;  // offset, length
  for (uint64_t b = 0; b < 40; ++b) writes.push_back({(b << 20) + 4096, 4096});
  writes.push_back({(3 << 20) + 65536, 8192});
  writes.push_back({(7 << 20) + (1 << 20) - 4096, 4096});
  writes.push_back({(9 << 20) + (1 << 20) - 2048, 1024});  // in the last 4 KiB, short of the end
  for (uint64_t b = 520; b < 526; ++b) writes.push_back({b << 20, 512});
  writes.push_back({(525 << 20) + (1 << 20) - 2048, 1024});
  {
    auto dev = Open("vhdx+" + Q(path));
    ASSERT_OK(dev);
    auto q = (*dev)->OpenQueue();
    ASSERT_OK(q);
    std::vector<std::vector<unsigned char>> data;
    std::vector<iovec> iov(writes.size());
    std::vector<IoRequest> reqs(writes.size());
    for (size_t i = 0; i < writes.size(); ++i) {
      data.push_back(Pattern(writes[i].second, static_cast<unsigned char>(i + 1)));
    }
    for (size_t i = 0; i < writes.size(); ++i) {
      iov[i] = {data[i].data(), data[i].size()};
      reqs[i].op = Op::kWrite;
      reqs[i].offset = writes[i].first;
      reqs[i].length = writes[i].second;
      reqs[i].iov = &iov[i];
      reqs[i].iovcnt = 1;
    }
    RunBatch(**q, reqs);
    for (auto& r : reqs) ASSERT_OK(r.status);
    q->reset();
    EXPECT_EQ(Counter(**dev, "allocations"), 46u);
    EXPECT_EQ(Counter(**dev, "log_entries"), 1u) << "one entry for the whole batch";
    EXPECT_EQ(Counter(**dev, "bat_page_writes"), 2u);
    ASSERT_OK((*dev)->Close());
  }
  auto dev = Open("vhdx+" + Q(path), OpenOptions{.read_only = true});
  ASSERT_OK(dev);
  for (size_t i = 0; i < writes.size(); ++i) {
    EXPECT_EQ(ReadBytes(**dev, writes[i].first, writes[i].second),
              Pattern(writes[i].second, static_cast<unsigned char>(i + 1)))
        << "write " << i;
  }
  CheckResult check;
  ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &check));
  EXPECT_EQ(check.corruptions, 0u);
}

TEST_F(Vhdx, FourThreadsAllocatingTheSameBlocks) {
  auto dev = MemoryVhdx(32 << 20, "block_size=1M", 64 << 20);
  ASSERT_OK(dev);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t b = 0; b < 32; ++b) {
        WriteBytes(**dev, (b << 20) + t * 4096, Pattern(4096, static_cast<unsigned char>(b + t)));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(Counter(**dev, "allocations"), 32u);
  for (uint64_t b = 0; b < 32; ++b) {
    for (int t = 0; t < 4; ++t) {
      ASSERT_EQ(ReadBytes(**dev, (b << 20) + t * 4096, 4096),
                Pattern(4096, static_cast<unsigned char>(b + t)));
    }
  }
}

TEST_F(Vhdx, ZeroStateBlocksOfAFixedImageAreZeroFilledOnFirstWrite) {
  const std::string path = dir_.File("z.vhdx");
  ASSERT_OK(
      CreateImage("vhdx", path, 4 << 20, "subformat=fixed,block_size=1M,block_state_zero=on"));
  const auto before = ReadAll(path);
  const uint64_t e = VhdxBatEntry(before, 1);
  ASSERT_EQ(vhdx::EntryState(e), vhdx::kZero);
  // Old bytes in the block's space must not show through.
  Patch(path, vhdx::EntryOffset(e), std::vector<unsigned char>(1 << 20, 0xEE));
  auto dev = Open("vhdx+" + Q(path));
  ASSERT_OK(dev);
  EXPECT_TRUE(IsZero(ReadBytes(**dev, 1 << 20, 1 << 20).data(), 1 << 20));
  WriteBytes(**dev, (1 << 20) + 4096, Pattern(4096, 1));
  EXPECT_EQ(Counter(**dev, "zero_filled_blocks"), 1u);
  auto all = ReadBytes(**dev, 1 << 20, 1 << 20);
  EXPECT_TRUE(IsZero(all.data(), 4096));
  EXPECT_TRUE(IsZero(all.data() + 8192, all.size() - 8192));
}

uint64_t UintProperty(const BlockDevice& dev, const std::string& key) {
  PropertyList props;
  dev.Properties(props);
  for (const Property& p : props) {
    if (p.key == key) return std::get<uint64_t>(p.value);
  }
  ADD_FAILURE() << "no property " << key;
  return 0;
}

TEST_F(Vhdx, TheBatHoldsOnlyThePagesWithAnEntry) {
  // 4 TiB of 1 MiB blocks: 4,194,304 payload entries and 1,024 bitmap entries, 32 MiB of BAT
  // in 8,194 pages of 512 entries, all 0 (NOT_PRESENT) in a new image, whose file leaves them
  // a hole. The open neither reads them nor holds them: 8 bytes a page pointer (64 KiB). It
  // used to hold the BAT whole, 32 MiB, as qemu-img info does.
  const std::string path = dir_.File("big.vhdx");
  ASSERT_OK(CreateImage("vhdx", path, uint64_t{4} << 40, "block_size=1M"));
  const uint64_t bat_bytes = ((uint64_t{4} << 20) + 1024) * 8;
  ResetPeakResident();
  const uint64_t before = ResidentBytes();
  {
    auto dev = Open("vhdx+" + Q(path), OpenOptions{.read_only = true});
    ASSERT_OK(dev);
    if (!kSanitizedBuild) {  // the sanitizer's allocator pads and quarantines memory
      const uint64_t peak = PeakResidentBytes() - before;
      EXPECT_LT(peak, bat_bytes / 8) << "peak " << peak << " bytes for a BAT of " << bat_bytes;
    }
    EXPECT_EQ(UintProperty(**dev, "bat_pages_resident"), 0u);
    const LayerStats file = static_cast<Layer&>(**dev).lower_device().Stats();
    EXPECT_LT(file.of(Op::kRead).bytes, bat_bytes / 8) << "the BAT's hole was not read";
    EXPECT_EQ(UintProperty(**dev, "blocks_not_present"), uint64_t{4} << 20);
  }
  // Three blocks far apart (the first, one at 2 TiB, the last) allocate the three BAT pages
  // that hold their entries, and a reopen loads those three alone.
  const uint64_t blocks[] = {0, uint64_t{1} << 21, (uint64_t{4} << 20) - 1};
  {
    auto dev = Open("vhdx+" + Q(path));
    ASSERT_OK(dev);
    for (uint64_t b : blocks) {
      WriteBytes(**dev, (b << 20) + 8192, Pattern(4096, static_cast<unsigned char>(b)));
    }
    EXPECT_EQ(UintProperty(**dev, "bat_pages_resident"), 3u);
    ASSERT_OK((*dev)->Close());
  }
  auto dev = Open("vhdx+" + Q(path), OpenOptions{.read_only = true});
  ASSERT_OK(dev);
  EXPECT_EQ(UintProperty(**dev, "bat_pages_resident"), 3u);
  EXPECT_EQ(UintProperty(**dev, "blocks_fully_present"), 3u);
  EXPECT_EQ(UintProperty(**dev, "blocks_not_present"), (uint64_t{4} << 20) - 3);
  for (uint64_t b : blocks) {
    EXPECT_EQ(ReadBytes(**dev, (b << 20) + 8192, 4096),
              Pattern(4096, static_cast<unsigned char>(b)));
    EXPECT_EQ(ReadBytes(**dev, (b << 20) + 4096, 4096), std::vector<unsigned char>(4096, 0));
  }
  std::vector<Extent> ex;
  ASSERT_OK((*dev)->MapExtents(0, uint64_t{4} << 40, &ex));
  uint64_t data = 0;
  for (const Extent& e : ex) {
    if (e.flags != 0) continue;
    data += e.length;
    EXPECT_TRUE(std::any_of(
        std::begin(blocks), std::end(blocks),
        [&](uint64_t b) { return e.offset >> 20 == b && (e.offset + e.length - 1) >> 20 == b; }))
        << "data at " << e.offset;
  }
  EXPECT_GE(data, 3u * 4096);
  CheckResult check;
  ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &check));
  EXPECT_EQ(check.corruptions, 0u);
}

TEST_F(Vhdx, QueuesOnFourThreadsAllocateIntoAbsentBatPagesAtOnce) {
  // 64 GiB of 1 MiB blocks: 129 BAT pages, none resident. Four threads, each with its own
  // queue, write to the same eight blocks 512 apart (a page each) while the pages are absent,
  // and a fifth reads them meanwhile: each page is allocated once, every write lands, and a
  // read sees zeros or the data.
  auto dev = MemoryVhdx(uint64_t{64} << 30, "block_size=1M", 64 << 20);
  ASSERT_OK(dev);
  ASSERT_EQ(UintProperty(**dev, "bat_pages_resident"), 0u);
  constexpr uint64_t kBlocks = 8;
  auto block = [](uint64_t i) { return i * 512 + 3; };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < kBlocks; ++i) {
        WriteBytes(**dev, (block(i) << 20) + t * 4096,
                   Pattern(4096, static_cast<unsigned char>(i + t)));
      }
    });
  }
  threads.emplace_back([&] {
    for (uint64_t i = 0; i < kBlocks; ++i) {
      const std::vector<unsigned char> got = ReadBytes(**dev, block(i) << 20, 4096);
      EXPECT_TRUE(got == std::vector<unsigned char>(4096, 0) ||
                  got == Pattern(4096, static_cast<unsigned char>(i)))
          << "block " << block(i);
    }
  });
  for (auto& th : threads) th.join();
  EXPECT_EQ(Counter(**dev, "allocations"), kBlocks);
  EXPECT_EQ(UintProperty(**dev, "bat_pages_resident"), kBlocks);
  for (uint64_t i = 0; i < kBlocks; ++i) {
    for (int t = 0; t < 4; ++t) {
      ASSERT_EQ(ReadBytes(**dev, (block(i) << 20) + t * 4096, 4096),
                Pattern(4096, static_cast<unsigned char>(i + t)));
    }
  }
}

TEST_F(Vhdx, MapShowsBlockStates) {
  auto dev = MemoryVhdx(8 << 20, "block_size=1M", 16 << 20);
  ASSERT_OK(dev);
  WriteBytes(**dev, 2 << 20, Pattern(4096, 1));
  std::vector<Extent> ex;
  ASSERT_OK((*dev)->MapExtents(0, 8 << 20, &ex));
  // The allocated block holds data only where the file below does (here the 4 KiB written).
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[0], (Extent{0, 2 << 20, kExtentHole | kExtentZero}));
  EXPECT_EQ(ex[1], (Extent{2 << 20, 4096, 0}));
  EXPECT_EQ(ex[2], (Extent{(2 << 20) + 4096, (6 << 20) - 4096, kExtentHole | kExtentZero}));
}

// ---- Bad input: clear errors, nothing written, memory bounded ----

class VhdxBadInput : public Vhdx {
 protected:
  std::string Make(const std::string& options = "block_size=1M") {
    const std::string path = dir_.File("b.vhdx");
    EXPECT_OK(CreateImage("vhdx", path, 16 << 20, options));
    return path;
  }
  std::string OpenError(const std::string& path) {
    auto dev = Open("vhdx+" + Q(path));
    if (dev) return "";
    return dev.error().message;
  }
  // Rewrites the checksum of the structure of `size` bytes at `at`.
  static void FixChecksum(std::vector<unsigned char>& b, uint64_t at, size_t size) {
    StoreLE32(&b[at + 4], 0);
    StoreLE32(&b[at + 4], vhdx::Checksum(std::span<const uint8_t>(&b[at], size), 4));
  }
};

TEST_F(VhdxBadInput, NotAVhdx) {
  const std::string path = dir_.File("raw.img");
  WriteFile(path, 4 << 20, 0);
  EXPECT_NE(OpenError(path).find("vhdxfile"), std::string::npos);
  WriteFile(dir_.File("tiny"), 4096, 0);
  EXPECT_NE(OpenError(dir_.File("tiny")).find("too small"), std::string::npos);
}

// Probing (docs/stack-spec.md, "Probing and writable opens"): the identifier alone is not a
// VHDX; one valid header is. An identifier without one is reported, not guessed.
TEST_F(VhdxBadInput, ProbeNeedsAValidHeaderAndReportsAnIdentifierWithoutOne) {
  const std::string path = Make();
  for (bool read_only : {true, false}) {
    auto dev = OpenImage(path, OpenOptions{.read_only = read_only});
    ASSERT_OK(dev);
    EXPECT_EQ((*dev)->kind(), "vhdx");
  }
  auto b = ReadAll(path);
  b[(64 << 10) + 100] ^= 1;  // one header bad: the other still makes it a VHDX
  WriteAll(path, b);
  auto one = OpenImage(path, OpenOptions{.read_only = true});
  ASSERT_OK(one);
  EXPECT_EQ((*one)->kind(), "vhdx");
  one->reset();
  b[(128 << 10) + 100] ^= 1;
  WriteAll(path, b);
  for (bool read_only : {true, false}) {
    auto dev = OpenImage(path, OpenOptions{.read_only = read_only});
    ASSERT_FALSE(dev) << "neither a VHDX nor raw";
    EXPECT_NE(dev.error().message.find("looks like a vhdx image but is not a valid one "
                                       "('vhdxfile' identifier at offset 0, but vhdx: header "
                                       "checksum"),
              std::string::npos)
        << dev.error().message;
    EXPECT_NE(dev.error().message.find("at offset 0x20004"), std::string::npos)
        << "both headers named: " << dev.error().message;
    EXPECT_NE(dev.error().message.find("name the format"), std::string::npos);
  }
  EXPECT_OK(Open(Q(path))) << "named, it opens raw";
  auto check = RunVstack("check " + path);
  EXPECT_EQ(check.status, 2) << "a read-only check opens it as a VHDX to report it: "
                             << check.output;
  EXPECT_NE(RunVstack("check -r all " + path).status, 0) << "repair needs the format named";
  // An identifier in a file too small for headers is reported too.
  const std::string tiny = dir_.File("tiny");
  WriteAll(tiny, std::vector<unsigned char>(b.begin(), b.begin() + 8192));
  auto dev = OpenImage(tiny, OpenOptions{.read_only = true});
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message.find("too small for the VHDX headers"), std::string::npos)
      << dev.error().message;
}

// A raw image opened writable by path keeps its format: a guest cannot write the "vhdxfile"
// identifier (in its sector, or with a whole VHDX prologue behind it) at offset 0.
TEST_F(VhdxBadInput, RawGuardRefusesTheIdentifierAtOffsetZero) {
  const std::string vhdx = Make();
  const auto image = ReadAll(vhdx);
  const std::string raw = dir_.File("disk.raw");
  ASSERT_OK(CreateImage("raw", raw, 4 << 20));
  {
    auto dev = OpenImage(raw);
    ASSERT_OK(dev);
    EXPECT_EQ((*dev)->kind(), "raw-guard");
    auto bytes = [](const unsigned char* p, size_t n) {
      return std::span<const std::byte>(reinterpret_cast<const std::byte*>(p), n);
    };
    SyncIo io(**dev);
    EXPECT_EQ(io.Write(0, bytes(image.data(), 1 << 20)), make_error_code(Errc::kReadOnly))
        << "a whole VHDX prologue";
    EXPECT_EQ(io.Write(0, bytes(image.data(), 4096)), make_error_code(Errc::kReadOnly));
    std::vector<unsigned char> sector(4096, 0);
    std::memcpy(sector.data(), "vhdXfile", 8);  // other bytes there go through
    EXPECT_FALSE(io.Write(0, bytes(sector.data(), 4096)));
    EXPECT_FALSE(io.Write(4096, bytes(image.data(), 4096))) << "the identifier elsewhere";
  }
  std::string spec;
  auto again = OpenImage(raw, OpenOptions{.read_only = true}, &spec);
  ASSERT_OK(again);
  EXPECT_EQ(spec.rfind("file:", 0), 0u) << spec;
  again->reset();
  // Named, the file takes any bytes.
  auto named = Open(Q(raw));
  ASSERT_OK(named);
  WriteBytes(**named, 0, std::vector<unsigned char>(image.begin(), image.begin() + 4096));
  ASSERT_OK((*named)->Close());
}

TEST_F(VhdxBadInput, OneCorruptHeaderFallsBackToTheOtherBothCorruptIsAnError) {
  const std::string path = Make();
  auto b = ReadAll(path);
  b[(64 << 10) + 100] ^= 1;
  WriteAll(path, b);
  EXPECT_EQ(OpenError(path), "");
  b[(128 << 10) + 100] ^= 1;
  WriteAll(path, b);
  EXPECT_NE(OpenError(path).find("checksum"), std::string::npos) << OpenError(path);
}

TEST_F(VhdxBadInput, RegionsAndMetadata) {
  const std::string path = Make();
  const auto good = ReadAll(path);
  // A region past the end of the file, checksummed: both tables.
  auto b = good;
  for (uint64_t rt : {192u << 10, 256u << 10}) {
    StoreLE64(&b[rt + 16 + 16], 1ull << 40);
    FixChecksum(b, rt, 64 << 10);
  }
  WriteAll(path, b);
  EXPECT_NE(OpenError(path).find("inside the file"), std::string::npos) << OpenError(path);
  // An unknown required region.
  b = good;
  for (uint64_t rt : {192u << 10, 256u << 10}) {
    b[rt + 16] ^= 0x55;
    FixChecksum(b, rt, 64 << 10);
  }
  WriteAll(path, b);
  EXPECT_NE(OpenError(path).find("required but unknown"), std::string::npos) << OpenError(path);
  // Block size 3 MiB in the metadata.
  b = good;
  const uint64_t meta = 2 << 20;
  StoreLE32(&b[meta + (64 << 10)], 3 << 20);
  WriteAll(path, b);
  EXPECT_NE(OpenError(path).find("block size"), std::string::npos) << OpenError(path);
  // A huge virtual size: the BAT region is too small for it; nothing is allocated for it.
  b = good;
  StoreLE64(&b[meta + (64 << 10) + 8], 64ull << 40);
  WriteAll(path, b);
  EXPECT_NE(OpenError(path).find("too small"), std::string::npos) << OpenError(path);
  // Logical sector size 1000.
  b = good;
  StoreLE32(&b[meta + (64 << 10) + 32], 1000);
  WriteAll(path, b);
  EXPECT_NE(OpenError(path).find("logical sector"), std::string::npos) << OpenError(path);
  // A parent (differencing VHDX).
  b = good;
  StoreLE32(&b[meta + (64 << 10) + 4], 2);
  WriteAll(path, b);
  EXPECT_NE(OpenError(path).find("differencing"), std::string::npos) << OpenError(path);
  EXPECT_EQ(ReadAll(path), b) << "a refused image is not written";
}

TEST_F(VhdxBadInput, BatEntriesPastTheEndOrInvalidStates) {
  const std::string path = Make();
  const auto good = ReadAll(path);
  const uint64_t bat = 3 << 20;
  auto b = good;
  StoreLE64(&b[bat + 8], vhdx::MakeEntry(vhdx::kFullyPresent, 1ull << 40));
  WriteAll(path, b);
  EXPECT_NE(OpenError(path).find("past the end"), std::string::npos) << OpenError(path);
  StoreLE64(&b[bat + 8], vhdx::MakeEntry(vhdx::kFullyPresent, 1 << 20));  // into the header
  WriteAll(path, b);
  EXPECT_NE(OpenError(path).find("into the metadata"), std::string::npos) << OpenError(path);
  StoreLE64(&b[bat + 8], 4);
  WriteAll(path, b);
  EXPECT_NE(OpenError(path).find("state"), std::string::npos) << OpenError(path);
  // Opened for check, the bad entry is reported and its block fails with kCorruption.
  auto dev = Open("vhdx+" + Q(path), OpenOptions{.read_only = true, .for_check = true});
  ASSERT_OK(dev);
  CheckResult check;
  ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &check));
  EXPECT_EQ(check.corruptions, 1u);
  auto q = (*dev)->OpenQueue();
  ASSERT_OK(q);
  AlignedBuffer buf(4096);
  iovec v = buf.iov();
  IoRequest r;
  r.op = Op::kRead;
  r.offset = 1 << 20;
  r.length = 4096;
  r.iov = &v;
  r.iovcnt = 1;
  EXPECT_EQ(Execute(**q, r), make_error_code(Errc::kCorruption));
}

// Blocks that share file space: two present blocks at one offset are corruption (a write to
// one lands in the other; compact truncated one away), and the space a ZERO block keeps is
// reused only if it is its own (a ZERO entry pointing into a present block made the next
// write there overwrite that block).
TEST_F(VhdxBadInput, BlocksSharingFileSpace) {
  const std::string path = Make();
  const auto block0 = Pattern(1 << 20, 3), block3 = Pattern(1 << 20, 9);
  {
    auto dev = Open("vhdx+" + Q(path));
    ASSERT_OK(dev);
    {
      SyncIo io(**dev);
      AlignedBuffer b(1 << 20);
      std::memcpy(b.data(), block0.data(), b.size());
      ASSERT_OK(io.Write(0, b.span()));
      std::memcpy(b.data(), block3.data(), b.size());
      ASSERT_OK(io.Write(3 << 20, b.span()));
    }
    ASSERT_OK((*dev)->Close());
  }
  const auto good = ReadAll(path);
  const uint64_t bat = 3 << 20;
  const uint64_t e0 = LoadLE64(&good[bat]);
  ASSERT_EQ(vhdx::EntryState(e0), vhdx::kFullyPresent);

  // BAT[3] = BAT[0]: refused by a normal open and by compact; check names the overlap.
  auto b = good;
  StoreLE64(&b[bat + 3 * 8], e0);
  WriteAll(path, b);
  EXPECT_NE(OpenError(path).find("overlap"), std::string::npos) << OpenError(path);
  auto compacted = CompactImage(path);
  ASSERT_FALSE(compacted);
  EXPECT_NE(compacted.error().message.find("overlap"), std::string::npos)
      << compacted.error().message;
  EXPECT_EQ(ReadAll(path), b) << "compact changed the refused image";
  {
    auto dev = Open("vhdx+" + Q(path), OpenOptions{.read_only = true, .for_check = true});
    ASSERT_OK(dev);
    CheckResult check;
    ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &check));
    EXPECT_GE(check.corruptions, 1u);
  }

  // BAT[2] ZERO, keeping block 0's space: block 2's first write takes new space.
  b = good;
  StoreLE64(&b[bat + 2 * 8], vhdx::MakeEntry(vhdx::kZero, vhdx::EntryOffset(e0)));
  WriteAll(path, b);
  const auto mark = Pattern(4096, 77);
  {
    auto dev = Open("vhdx+" + Q(path));
    ASSERT_OK(dev);
    {
      SyncIo io(**dev);
      AlignedBuffer w(4096);
      std::memcpy(w.data(), mark.data(), w.size());
      ASSERT_OK(io.Write(2 << 20, w.span()));
    }
    ASSERT_OK((*dev)->Close());
  }
  auto dev = Open("vhdx+" + Q(path), OpenOptions{.read_only = true});
  ASSERT_OK(dev);
  SyncIo io(**dev);
  AlignedBuffer r(1 << 20);
  ASSERT_OK(io.Read(0, r.span()));
  EXPECT_EQ(std::memcmp(r.data(), block0.data(), r.size()), 0) << "block 0 was overwritten";
  ASSERT_OK(io.Read(2 << 20, r.span()));
  EXPECT_EQ(std::memcmp(r.data(), mark.data(), mark.size()), 0);
  CheckResult check;
  ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &check));
  EXPECT_EQ(check.corruptions, 0u);
}

TEST_F(VhdxBadInput, CorruptLogEntriesAreNotReplayed) {
  std::vector<unsigned char> data;
  const std::string path = DirtyImage(dir_, &data);
  auto b = ReadAll(path);
  b[(1 << 20) + 4096 + 100] ^= 1;  // the entry's data sector: its checksum fails
  WriteAll(path, b);
  auto dev = Open("vhdx+" + Q(path));
  ASSERT_OK(dev);
  EXPECT_TRUE(IsZero(ReadBytes(**dev, 5 << 20, 4096).data(), 4096))
      << "an entry that fails its checksum is ignored";
}

TEST_F(VhdxBadInput, LogEntryThatWritesIntoTheHeadersIsRefused) {
  const std::string path = Make();
  auto b = ReadAll(path);
  // A valid entry, with the header naming its log GUID, that targets offset 64 KiB.
  vhdx::Guid guid = vhdx::Guid::Random();
  vhdx::LogPage page;
  page.file_offset = 64 << 10;
  vhdx::LogEntryInfo info;
  info.sequence = 1;
  info.last_file_offset = b.size();
  const auto entry = vhdx::EncodeLogEntry(guid, info, {&page, 1});
  std::memcpy(&b[1 << 20], entry.data(), entry.size());
  for (uint64_t h : {64u << 10, 128u << 10}) {
    std::memcpy(&b[h + 48], guid.bytes.data(), 16);
    FixChecksum(b, h, 4096);
  }
  WriteAll(path, b);
  EXPECT_NE(OpenError(path).find("into the headers"), std::string::npos) << OpenError(path);
}

// A file cut short. Inside a payload block: `check -r all` reports every entry that now
// points past the end (exit 2) and changes nothing, and a check-opened device written through
// (as a repair of a layer above would) keeps those entries on disk and puts new blocks past
// the space they point at. Inside the metadata region: the check cannot open it, says why,
// and changes nothing.
TEST_F(VhdxBadInput, TruncatedFileCheckRepairNeverDropsWhatTheBatPointsAt) {
  const std::string path = dir_.File("cut.vhdx");
  ASSERT_OK(CreateImage("vhdx", path, 8 << 20, "block_size=1M"));
  {
    auto dev = Open("vhdx+" + Q(path));
    ASSERT_OK(dev);
    for (uint64_t block = 0; block < 3; ++block) {
      WriteBytes(**dev, block << 20, Pattern(4096, static_cast<unsigned char>(block + 1)));
    }
    ASSERT_OK((*dev)->Close());
  }
  const auto whole = ReadAll(path);
  ASSERT_EQ(whole.size(), 7u << 20) << "blocks 0, 1, 2 at 4, 5 and 6 MiB";
  const uint64_t entries[3] = {VhdxBatEntry(whole, 0), VhdxBatEntry(whole, 1),
                               VhdxBatEntry(whole, 2)};
  auto cut = whole;
  cut.resize((5 << 20) + (512 << 10));  // in the middle of block 1
  WriteAll(path, cut);
  CommandResult r = RunVstack("check -r all " + path);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("BAT entry 1 (block 1) points at 5242880, into the metadata or past "
                          "the end of the file"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("BAT entry 2 (block 2)"), std::string::npos) << r.output;
  EXPECT_TRUE(ReadAll(path) == cut) << "the check changed the file";
  {
    auto dev = Open("vhdx+" + Q(path), OpenOptions{.read_only = false, .for_check = true});
    ASSERT_OK(dev);
    EXPECT_EQ(ReadBytes(**dev, 0, 4096), Pattern(4096, 1));
    WriteBytes(**dev, 3 << 20, Pattern(4096, 4));  // allocates in the same BAT page
    ASSERT_OK((*dev)->Close());
  }
  const auto after = ReadAll(path);
  for (uint64_t block = 0; block < 3; ++block) {
    EXPECT_EQ(VhdxBatEntry(after, block), entries[block]) << "block " << block << "'s entry";
  }
  const uint64_t placed = vhdx::EntryOffset(VhdxBatEntry(after, 3));
  EXPECT_GE(placed, 7u << 20) << "the new block overlaps space the BAT points at";
  EXPECT_TRUE(std::equal(cut.begin() + (4 << 20), cut.end(), after.begin() + (4 << 20)))
      << "the bytes of the blocks the BAT points at changed";

  cut = whole;
  cut.resize((2 << 20) + 4096);  // in the metadata region, before the BAT
  WriteAll(path, cut);
  r = RunVstack("check -r all " + path);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("cannot open the image"), std::string::npos) << r.output;
  EXPECT_TRUE(ReadAll(path) == cut) << "the check changed the file";
}

}  // namespace
}  // namespace vstack::testing
