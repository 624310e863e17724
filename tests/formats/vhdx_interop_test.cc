// VHDX interoperability with the real implementations (installed by ./dev.sh, so these tests
// fail rather than skip when the tools are missing):
//  - images made by qemu-img (dynamic, fixed, several block sizes, odd sizes) and written by
//    qemu-io read exactly as `qemu-img convert -O raw` reads them;
//  - qemu-io writing into vstack images (1 MiB to 256 MiB blocks, fixed, ZERO blocks);
//  - images made and written by vstack (random content) read identically by qemu-img
//    (`compare`, `check`) and by libvhdi, which is linked here, with the same size; 4 KiB
//    logical sectors by libvhdi only (qemu 7.2 refuses them, which is checked);
//  - a dirty log written by qemu is replayed by vstack.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>

#include "bench/anchors/anchors.h"
#include "formats/vhdx/vhdx_format.h"
#include "lib/endian.h"
#include "tests/formats/libvhdi_file.h"
#include "tests/formats/vhd_test_util.h"
#include "tests/formats/vhdx_test_util.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tools.h"

namespace vstack::testing {
namespace {

CommandResult Tool(const std::string& cmd) {
  CommandResult r = RunCommand(cmd);
  EXPECT_EQ(r.status, 0) << cmd << "\n" << r.output;
  return r;
}

class VhdxInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {"qemu-img", "qemu-io"}) VSTACK_REQUIRE_PROGRAM(tool, "qemu-utils");
  }

  // qemu-io writes patterns and random data: the first sector, a run across a block
  // boundary, an unaligned-to-4K run, the last 64 KiB.
  void QemuWrites(const std::string& path, uint64_t size, uint64_t block) {
    const std::string random = path + ".random";
    std::vector<unsigned char> data(3 * 65536);
    rng_.Fill(data.data(), data.size());
    WriteAll(random, data);
    std::string cmd = "qemu-io -f vhdx -c 'write -P 0xaa 0 4096'";
    if (size > block + 8192) {
      cmd += " -c 'write -s " + random + " " + std::to_string(block - 65536) + " 131072'";
    }
    if (size > 3 * block) {
      cmd += " -c 'write -P 0xcc " + std::to_string(2 * block + 4096) + " 12288'";
    }
    cmd += " -c 'write -s " + random + " " + std::to_string(size - 65536) + " 65536'";
    Tool(cmd + " " + path);
    std::remove(random.c_str());
  }

  void ExpectSameRaw(const std::string& path) {
    const std::string ours = path + ".vstack.raw", theirs = path + ".qemu.raw";
    Tool("qemu-img convert -f vhdx -O raw " + path + " " + theirs);
    CommandResult c = RunVstack("convert -O raw " + path + " " + ours);
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_EQ(FileSize(ours), FileSize(theirs)) << path;
    EXPECT_TRUE(ReadAll(ours) == ReadAll(theirs)) << path;
    CommandResult check = RunVstack("check " + path);
    EXPECT_EQ(check.status, 0) << check.output;
    std::remove(ours.c_str());
    std::remove(theirs.c_str());
  }

  TempDir dir_;
  Rng rng_{7};
};

TEST_F(VhdxInterop, QemuImagesWrittenByQemuIoReadLikeQemuImgConvert) {
  struct Case {
    const char* options;
    uint64_t size;
    uint64_t block;
  };
  const Case cases[] = {
      {"subformat=dynamic,block_size=1M", 24 << 20, 1 << 20},
      {"subformat=dynamic", (20 << 20) + 3 * 512, 8 << 20},
      {"subformat=dynamic,block_size=32M,block_state_zero=off", 100 << 20, 32 << 20},
      {"subformat=dynamic,block_size=1M,log_size=2M", (5 << 20) + 512, 1 << 20},
      {"subformat=fixed,block_size=1M", 12 << 20, 1 << 20},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.options);
    const std::string path = dir_.File("q" + std::to_string(n++) + ".vhdx");
    Tool("qemu-img create -q -f vhdx -o " + std::string(c.options) + " " + path + " " +
         std::to_string(c.size));
    QemuWrites(path, c.size, c.block);
    ExpectSameRaw(path);
  }
}

TEST_F(VhdxInterop, QemuIoWritesIntoVstackImages) {
  // (qemu 7.2 refuses VHDX with 4 KiB logical sectors: see below.)
  const char* cases[] = {"block_size=1M", "block_size=256M", "subformat=fixed,block_size=2M",
                         "block_state_zero=on"};
  int n = 0;
  for (const char* options : cases) {
    SCOPED_TRACE(options);
    const std::string path = dir_.File("v" + std::to_string(n++) + ".vhdx");
    const uint64_t size = (20 << 20) + 4096;
    ASSERT_OK(CreateImage("vhdx", path, size, options));
    Tool("qemu-img check -f vhdx " + path);
    QemuWrites(path, size, 1 << 20);
    ExpectSameRaw(path);
  }
}

TEST_F(VhdxInterop, VstackImagesReadIdenticallyByQemuAndLibvhdi) {
  const char* cases[] = {"block_size=1M",
                         "",
                         "block_size=256M",
                         "subformat=fixed,block_size=4M",
                         "block_size=2M,logical_sector_size=4096",
                         "subformat=fixed,block_size=1M,logical_sector_size=4096"};
  int n = 0;
  for (const char* options : cases) {
    for (uint64_t size : {uint64_t{24} << 20, (uint64_t{20} << 20) + 3 * 4096}) {
      SCOPED_TRACE(std::string(options) + " " + std::to_string(size));
      const std::string path = dir_.File("w" + std::to_string(n++) + ".vhdx");
      ASSERT_OK(CreateImage("vhdx", path, size, options));
      auto dev = OpenImage(path);
      ASSERT_OK(dev);
      ASSERT_EQ((*dev)->geometry().size_bytes, size);
      std::vector<unsigned char> model(size, 0);
      for (int i = 0; i < 24; ++i) {
        const uint64_t len = (1 + rng_.Below(32)) * 4096;
        const uint64_t off = rng_.Below((size - len) / 4096 + 1) * 4096;
        std::vector<unsigned char> data(len);
        rng_.Fill(data.data(), len);
        WriteBytes(**dev, off, data);
        std::copy(data.begin(), data.end(), model.begin() + off);
      }
      ASSERT_OK((*dev)->Close());
      dev->reset();

      if (std::string(options).find("logical_sector_size=4096") == std::string::npos) {
        CommandResult info = Tool("qemu-img info -f vhdx --output=json " + path);
        EXPECT_EQ(nlohmann::json::parse(info.output)["virtual-size"].get<uint64_t>(), size);
        Tool("qemu-img check -f vhdx " + path);
        const std::string raw = path + ".model.raw";
        WriteAll(raw, model);
        CommandResult cmp = Tool("qemu-img compare -f vhdx -F raw " + path + " " + raw);
        EXPECT_NE(cmp.output.find("Images are identical"), std::string::npos) << cmp.output;
        std::remove(raw.c_str());
      } else {
        // qemu 7.2 supports only 512-byte logical sectors in VHDX; libvhdi reads these.
        CommandResult q = RunCommand("qemu-img info -f vhdx " + path);
        EXPECT_NE(q.status, 0);
        EXPECT_NE(q.output.find("not supported"), std::string::npos) << q.output;
      }

      LibvhdiFile vhdi(path);
      ASSERT_EQ(vhdi.error(), "");
      EXPECT_EQ(vhdi.MediaSize(), size);
      EXPECT_TRUE(vhdi.Read(0, size) == model) << "libvhdi reads what vstack wrote";
      EXPECT_EQ(RunVstack("check " + path).status, 0);
    }
  }
}

// Differencing VHDX: qemu 7.2's vhdx driver has no backing files (create refuses -b, open
// refuses HasParent), and neither has vstack's; a VHDX can still be the backing file of a
// qcow2 overlay in qemu, which reads a vstack image's data through it.
TEST_F(VhdxInterop, NoDifferencingVhdxInQemuOrVstackButQemuOverlaysReadVstackImages) {
  const std::string base = dir_.File("db.vhdx");
  ASSERT_OK(CreateImage("vhdx", base, 8 << 20, "block_size=1M"));
  std::vector<unsigned char> data(8 << 20);
  rng_.Fill(data.data(), data.size());
  {
    auto dev = OpenImage(base);
    ASSERT_OK(dev);
    WriteBytes(**dev, 0, data);
    ASSERT_OK((*dev)->Close());
  }
  CommandResult r = RunCommand("qemu-img create -q -f vhdx -b " + base + " -F vhdx " +
                               dir_.File("dc.vhdx") + " 2>&1");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Backing file not supported for file format 'vhdx'"), std::string::npos)
      << r.output;

  // HasParent set in the file parameters (the metadata table has no checksum).
  auto bytes = ReadAll(base);
  auto regions = vhdx::DecodeRegionTable(
      std::span<const uint8_t>(&bytes[vhdx::kRegionTableOffset[0]], vhdx::kRegionTableSize),
      vhdx::kRegionTableOffset[0], bytes.size());
  ASSERT_OK(regions);
  uint64_t meta = 0;
  for (const vhdx::Region& region : *regions) {
    if (region.id == vhdx::kMetadataRegionGuid) meta = region.offset;
  }
  ASSERT_EQ(std::memcmp(&bytes[meta], "metadata", 8), 0);
  bool found = false;
  for (uint64_t e = meta + 32; e < meta + 32 + 32 * (bytes[meta + 10] | (bytes[meta + 11] << 8));
       e += 32) {
    if (std::memcmp(&bytes[e], vhdx::kFileParametersGuid.bytes.data(), 16) != 0) continue;
    bytes[meta + LoadLE32(&bytes[e + 16]) + 4] |= 2;
    found = true;
  }
  ASSERT_TRUE(found);
  const std::string diff = dir_.File("dp.vhdx");
  WriteAll(diff, bytes);
  r = RunCommand("qemu-img info -f vhdx " + diff + " 2>&1");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Could not open"), std::string::npos) << r.output;
  r = RunVstack("info " + diff);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("differencing VHDX (HasParent set in the file parameters"),
            std::string::npos)
      << r.output;

  const std::string overlay = dir_.File("do.qcow2");
  Tool("qemu-img create -q -f qcow2 -b " + base + " -F vhdx " + overlay);
  const std::string raw = dir_.File("do.raw");
  Tool("qemu-io -f qcow2 -c 'write -P 0x5a 1M 4096' " + overlay);
  Tool("qemu-img convert -f qcow2 -O raw " + overlay + " " + raw);
  const std::vector<unsigned char> written(data.begin() + (1 << 20),
                                           data.begin() + (1 << 20) + 4096);
  std::fill(data.begin() + (1 << 20), data.begin() + (1 << 20) + 4096, 0x5a);
  EXPECT_TRUE(ReadAll(raw) == data) << "qemu reads the vstack image under its overlay";
  auto dev = OpenImage(base, OpenOptions{.read_only = true});
  ASSERT_OK(dev);
  EXPECT_EQ(ReadBytes(**dev, 1 << 20, 4096), written) << "the overlay took qemu's write";
}

// qemu applies each log entry at once and clears the log GUID, so a dirty qemu log is what a
// crash between its log write and the in-place write leaves: made here by naming qemu's last
// entry in the headers again and putting the BAT page back as it was before.
TEST_F(VhdxInterop, DirtyLogWrittenByQemuIsReplayed) {
  const std::string path = dir_.File("qd.vhdx");
  Tool("qemu-img create -q -f vhdx -o block_size=1M " + path + " 16M");
  const auto before = ReadAll(path);
  Tool("qemu-io -f vhdx -c 'write -P 0x5a 3M 8192' " + path);
  auto img = ReadAll(path);
  const uint64_t log = 1 << 20;
  ASSERT_EQ(std::memcmp(&img[log], "loge", 4), 0) << "qemu wrote its entry at the log's start";
  const uint64_t bat = 2 << 20;  // qemu's layout: BAT region at 2 MiB
  ASSERT_EQ(vhdx::EntryState(VhdxBatEntry(img, 3)), vhdx::kFullyPresent);
  std::memcpy(&img[bat], &before[bat], 4096);
  for (uint64_t h : {64u << 10, 128u << 10}) {
    std::memcpy(&img[h + 48], &img[log + 32], 16);  // the entry's log GUID
    StoreLE32(&img[h + 4], 0);
    StoreLE32(&img[h + 4], vhdx::Checksum(std::span<const uint8_t>(&img[h], 4096), 4));
  }
  WriteAll(path, img);
  // Read-only: refused, as qemu refuses it.
  CommandResult ro = RunVstack("info " + path);
  EXPECT_NE(ro.status, 0);
  EXPECT_NE(ro.output.find("replayed"), std::string::npos) << ro.output;
  EXPECT_NE(ro.output.find("the image's log holds 1 entry that must be replayed"),
            std::string::npos)
      << ro.output;
  CommandResult qro = RunCommand("qemu-io -r -f vhdx -c 'read 0 512' " + path);
  EXPECT_NE(qro.status == 0 && qro.output.find("read 512") != std::string::npos, true)
      << "qemu refuses it read-only too: " << qro.output;
  // Writable: replayed; the block reads back and qemu agrees.
  CommandResult check = RunVstack("check -r all " + path);
  EXPECT_NE(check.output.find("replayed 1 log entry"), std::string::npos) << check.output;
  EXPECT_EQ(vhdx::EntryState(VhdxBatEntry(ReadAll(path), 3)), vhdx::kFullyPresent);
  Tool("qemu-io -r -f vhdx -c 'read -P 0x5a 3M 8192' " + path);
  ExpectSameRaw(path);
}

// The image tools on VHDX: create with qemu-img's option names, info (text and JSON), check,
// map, convert to and from VHDX, compare.
TEST_F(VhdxInterop, ImageToolsWorkOnVhdx) {
  const std::string img = dir_.File("t.vhdx");
  CommandResult c =
      RunVstack("create -f vhdx -o subformat=dynamic,block_size=2M,log_size=2M " + img + " 20M");
  ASSERT_EQ(c.status, 0) << c.output;
  CommandResult bad = RunVstack("create -f vhdx -o block_size=3M " + dir_.File("bad.vhdx") + " 1G");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("block_size"), std::string::npos) << bad.output;
  const std::string raw = dir_.File("t.raw");
  std::vector<unsigned char> data(20 << 20, 0);
  rng_.Fill(data.data() + (4 << 20), 1 << 20);
  WriteAll(raw, data);
  c = RunVstack("convert -O vhdx -o block_size=1M " + raw + " " + dir_.File("c.vhdx"));
  ASSERT_EQ(c.status, 0) << c.output;
  c = RunVstack("compare " + raw + " " + dir_.File("c.vhdx"));
  EXPECT_EQ(c.status, 0) << c.output;
  Tool("qemu-img compare -f raw -F vhdx " + raw + " " + dir_.File("c.vhdx"));
  CommandResult info = RunVstack("info --output=json " + dir_.File("c.vhdx"));
  ASSERT_EQ(info.status, 0) << info.output;
  const auto j = nlohmann::json::parse(info.output);
  EXPECT_NE(info.output.find("\"vhdx\""), std::string::npos) << info.output;
  EXPECT_NE(info.output.find("blocks_fully_present"), std::string::npos) << info.output;
  (void)j;
  CommandResult text = RunVstack("info " + img);
  EXPECT_NE(text.output.find("log_size"), std::string::npos) << text.output;
  EXPECT_EQ(RunVstack("check " + dir_.File("c.vhdx")).status, 0);
  CommandResult map = RunVstack("map --output=json " + dir_.File("c.vhdx"));
  EXPECT_EQ(map.status, 0) << map.output;
  c = RunVstack("convert -O raw " + dir_.File("c.vhdx") + " " + dir_.File("back.raw"));
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_TRUE(ReadAll(dir_.File("back.raw")) == data);
}

// `vstack compact` on an image written by vstack and by qemu-io, with blocks that read as zeros
// and blocks at the end of the file: afterwards qemu-img check passes, qemu-img and libvhdi read
// the same contents as before, and the file is smaller.
TEST_F(VhdxInterop, CompactedImagesPassQemuCheckAndReadTheSame) {
  const std::string path = dir_.File("k.vhdx");
  const uint64_t size = 16 << 20;
  ASSERT_OK(CreateImage("vhdx", path, size, "block_size=1M"));
  std::vector<unsigned char> model(size, 0);
  {
    auto dev = OpenImage(path);
    ASSERT_OK(dev);
    for (uint64_t block : {0, 2, 3, 5, 7, 9, 12, 15}) {
      std::vector<unsigned char> data(65536, 0);  // blocks 3, 9 and 12 get zeros
      if (block != 3 && block != 9 && block != 12) rng_.Fill(data.data(), data.size());
      WriteBytes(**dev, (block << 20) + 8192, data);
      std::copy(data.begin(), data.end(), model.begin() + (block << 20) + 8192);
    }
    ASSERT_OK((*dev)->Close());
  }
  Tool("qemu-io -f vhdx -c 'write -P 0x00 13M 4096' -c 'write -P 0x5c 14M 4096' " + path);
  std::fill_n(model.begin() + (14 << 20), 4096, 0x5c);
  const uint64_t before = FileSize(path);
  CommandResult c = RunVstack("compact " + path);
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_NE(c.output.find("4 all-zero block(s) freed of 10"), std::string::npos) << c.output;
  EXPECT_LT(FileSize(path), before);
  Tool("qemu-img check -f vhdx " + path);
  const std::string raw = path + ".model.raw";
  WriteAll(raw, model);
  CommandResult cmp = Tool("qemu-img compare -f vhdx -F raw " + path + " " + raw);
  EXPECT_NE(cmp.output.find("Images are identical"), std::string::npos) << cmp.output;
  LibvhdiFile vhdi(path);
  ASSERT_EQ(vhdi.error(), "");
  EXPECT_TRUE(vhdi.Read(0, size) == model) << "libvhdi reads the compacted image the same";
  EXPECT_EQ(RunVstack("check " + path).status, 0);
  CommandResult fixed = RunVstack("compact " + dir_.File("f.vhdx"));
  EXPECT_NE(fixed.status, 0);
  ASSERT_OK(CreateImage("vhdx", dir_.File("f.vhdx"), size, "subformat=fixed,block_size=1M"));
  fixed = RunVstack("compact " + dir_.File("f.vhdx"));
  EXPECT_NE(fixed.status, 0);
  EXPECT_NE(fixed.output.find("only dynamic images can be compacted"), std::string::npos)
      << fixed.output;
}

// The bench presets run end to end, the fresh one allocating through the log, with qemu-img
// bench on identical images.
TEST_F(VhdxInterop, BenchPresetsRunAgainstQemuImgBench) {
  const std::string scratch = dir_.File("scratch");
  ASSERT_EQ(::mkdir(scratch.c_str(), 0755), 0);
  CommandResult r = RunVstack(
      "bench --quiet --output=json --backend file --direct off --stack vhdx-fixed "
      "--stack vhdx-dynamic --stack vhdx-dynamic-fresh --bs 4K --write-pct 100 --size 16M "
      "--duration 150ms --warmup 50ms --rounds 1 --qd 4 --compare-qemu --dir " +
      scratch + " --report-dir " + dir_.File("report"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(0, r.output.rfind('}') + 1));
  ASSERT_EQ(j["stacks"].size(), 3u);
  EXPECT_NE(r.output.find("\"allocations\""), std::string::npos) << "the fresh preset allocates";
  EXPECT_NE(r.output.find("-f vhdx"), std::string::npos) << "qemu-img bench ran on the images";
}

// The allocation-heavy comparison (docs/benchmarks.md) needs images of 1 TiB: qemu-img bench
// takes a step below 2 GiB only ("Invalid step_size specified"), so the scattering stride of
// a large image stays below it, and still visits every block once per pass (coprime).
TEST(VhdxBench, QemuScatterStrideStaysBelow2GiBAndCoprime) {
  for (uint64_t size : {uint64_t{256} << 20, uint64_t{3} << 30, uint64_t{1} << 40}) {
    for (uint32_t bs : {4096u, 65536u}) {
      const uint64_t blocks = size / bs;
      const uint64_t step = bench::ScatterStride(blocks, bs);
      EXPECT_LE(step, uint64_t{INT32_MAX}) << size << " " << bs;
      EXPECT_EQ(step % bs, 0u);
      EXPECT_EQ(std::gcd(step / bs, blocks), 1u) << size << " " << bs;
      EXPECT_GT(step, size / 4 > (uint64_t{1} << 30) ? uint64_t{1} << 30 : size / 4)
          << "spread out, not a short step";
    }
  }
}

}  // namespace
}  // namespace vstack::testing
