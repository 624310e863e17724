// VHD interoperability with the real implementations (installed by ./dev.sh, so these tests
// fail rather than skip when the tools are missing):
//  - images made by qemu-img and written by qemu-io read exactly as `qemu-img convert -O raw`
//    reads them (fixed, dynamic, force_size, odd sizes, 2040 GiB, 512 KiB/2 MiB/4 MiB blocks);
//  - images made and written by vstack (random content, partial blocks, every block size)
//    read identically through qemu-img (-f vpc) and libvhdi, which is linked here; chains
//    read identically through libvhdi but for one documented difference, predicted sector for
//    sector: it reads a child's sector bitmap a byte (8 sectors) at a time;
//  - vstack, qemu-img and libvhdi agree on the virtual size of every image vstack creates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/spec.h"
#include "lib/sync_io.h"
#include "tests/formats/libvhdi_file.h"
#include "tests/formats/vhd_test_util.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tools.h"

namespace vstack::testing {
namespace {

// A VHD opened with libvhdi.
using Vhdi = LibvhdiFile;

CommandResult Tool(const std::string& cmd) {
  CommandResult r = RunCommand(cmd);
  EXPECT_EQ(r.status, 0) << cmd << "\n" << r.output;
  return r;
}

uint64_t QemuVirtualSize(const std::string& path) {
  CommandResult r = Tool("qemu-img info -f vpc --output=json " + path);
  return nlohmann::json::parse(r.output)["virtual-size"].get<uint64_t>();
}

class VhdInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {"qemu-img", "qemu-io"}) VSTACK_REQUIRE_PROGRAM(tool, "qemu-utils");
  }

  // qemu-io writes a constant sector first, then random data (each run its own, so that data
  // read from a wrong offset, inside a run or from another run, cannot match): a run across a
  // block boundary, a run that is not 4 KiB-aligned, and the last 64 KiB. A constant run at
  // 4 KiB alignment follows the unaligned one.
  void QemuWrites(const std::string& path, uint64_t size, uint64_t block) {
    written_.clear();
    std::string cmd = "qemu-io -f vpc -c 'write -P 0xaa 0 512'";
    written_.push_back({0, std::vector<unsigned char>(512, 0xaa)});
    auto random = [&](uint64_t offset, uint64_t length) {
      std::vector<unsigned char> data(length);
      rng_.Fill(data.data(), data.size());
      const std::string source = path + ".random" + std::to_string(written_.size());
      WriteAll(source, data);
      cmd += " -c 'write -s " + source + " " + std::to_string(offset) + " " +
             std::to_string(length) + "'";
      written_.push_back({offset, std::move(data)});
    };
    if (size > block + 8192) random(block - 4608, 13312);
    if (size > 3 * block) {
      random(2 * block + 1536, 3072);
      cmd += " -c 'write -P 0xcc " + std::to_string(2 * block + 8192) + " 4096'";
      written_.push_back({2 * block + 8192, std::vector<unsigned char>(4096, 0xcc)});
    }
    if (size >= 65536 * 2) random(size - 65536, 65536);
    Tool(cmd + " " + path);
  }

  // vstack reads exactly what qemu-img convert -O raw reads, and what qemu-io wrote.
  void ExpectSameRaw(const std::string& path) {
    const std::string ours = path + ".vstack.raw", theirs = path + ".qemu.raw";
    Tool("qemu-img convert -f vpc -O raw " + path + " " + theirs);
    CommandResult c = RunVstack("convert -O raw " + path + " " + ours);
    ASSERT_EQ(c.status, 0) << c.output;
    EXPECT_EQ(FileSize(ours), FileSize(theirs)) << path;
    const std::vector<unsigned char> raw = ReadAll(ours);
    EXPECT_TRUE(raw == ReadAll(theirs)) << path;
    for (const auto& [offset, data] : written_) {
      ASSERT_LE(offset + data.size(), raw.size()) << path;
      EXPECT_TRUE(std::equal(data.begin(), data.end(), raw.begin() + offset))
          << path << ": what qemu-io wrote at " << offset << " reads back differently";
    }
    CommandResult check = RunVstack("check " + path);
    EXPECT_EQ(check.status, 0) << check.output;
    std::remove(ours.c_str());
    std::remove(theirs.c_str());
  }

  std::vector<std::pair<uint64_t, std::vector<unsigned char>>> written_;  // by QemuWrites
  Rng rng_{17};
  TempDir dir_;
};

TEST_F(VhdInterop, QemuImagesReadLikeQemuImgConvert) {
  struct Case {
    const char* options;
    uint64_t size;
  } cases[] = {
      {"subformat=fixed", 64 << 20},
      {"subformat=dynamic", 64 << 20},
      {"subformat=dynamic,force_size=on", 64 << 20},
      {"subformat=fixed,force_size=on", (100 << 20) + 3 * 512},
      {"subformat=dynamic", (100 << 20) + 3 * 512},
      {"subformat=dynamic,force_size=on", (100 << 20) + 3 * 512},
      {"subformat=fixed", 1000},
      {"subformat=dynamic", 1000},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string path = dir_.File("q" + std::to_string(n++) + ".vhd");
    Tool("qemu-img create -q -f vpc -o " + std::string(c.options) + " " + path + " " +
         std::to_string(c.size));
    const uint64_t size = QemuVirtualSize(path);
    auto dev = OpenImage(path);
    ASSERT_OK(dev) << c.options << " " << c.size;
    EXPECT_EQ((*dev)->kind(), "vhd") << "fixed images are found by their footer: " << c.options;
    EXPECT_EQ((*dev)->geometry().size_bytes, size) << c.options << " " << c.size;
    dev->reset();
    QemuWrites(path, size, 2 << 20);
    ExpectSameRaw(path);
  }
}

// qemu packs its blocks (2 MiB + 512 bytes apart). Zeroing 10 of them leaves a hole that
// takes 10 blocks packed but 9 with their data 4 KiB-aligned: compact placed them aligned and
// left the 10th's room as a leak that check reported (exit 3) after every later compact.
TEST_F(VhdInterop, CompactOfAQemuImageLeavesNoLeak) {
  const std::string raw = dir_.File("data.raw"), vhd = dir_.File("q.vhd"),
                    expect = dir_.File("expect.raw");
  std::vector<unsigned char> data(48 << 20);
  rng_.Fill(data.data(), data.size());
  WriteAll(raw, data);
  Tool("qemu-img convert -f raw -O vpc " + raw + " " + vhd);
  Tool("qemu-io -f vpc -c 'write -P 0 0 20M' " + vhd);
  Tool("qemu-img convert -f vpc -O raw " + vhd + " " + expect);
  CommandResult compact = RunVstack("compact " + vhd);
  ASSERT_EQ(compact.status, 0) << compact.output;
  EXPECT_NE(compact.output.find("10 block(s) moved"), std::string::npos) << compact.output;
  CommandResult check = RunVstack("check " + vhd);
  EXPECT_EQ(check.status, 0) << check.output;
  Tool("qemu-img compare -f vpc -F raw " + vhd + " " + expect);
}

TEST_F(VhdInterop, QemuIoWritesIntoVstackImagesOfEveryBlockSize) {
  for (const char* bs : {"512K", "2M", "4M"}) {
    const std::string path = dir_.File(std::string("b") + bs + ".vhd");
    ASSERT_OK(CreateImage("vhd", path, 40 << 20, std::string("block_size=") + bs));
    {  // vstack writes first, so qemu appends its blocks after ours
      auto dev = OpenImage(path);
      ASSERT_OK(dev);
      WriteBytes(**dev, 5 << 20, std::vector<unsigned char>(8192, 0x5A));
    }
    const uint64_t block = bs[0] == '5' ? 512 << 10 : bs[0] == '2' ? 2 << 20 : 4 << 20;
    QemuWrites(path, QemuVirtualSize(path), block);
    ExpectSameRaw(path);
    {  // and vstack again, after qemu's blocks
      auto dev = OpenImage(path);
      ASSERT_OK(dev);
      WriteBytes(**dev, 30 << 20, std::vector<unsigned char>(4096, 0x77));
    }
    ExpectSameRaw(path);
  }
}

TEST_F(VhdInterop, Qemu2040GiBDynamicImage) {
  const std::string path = dir_.File("huge.vhd");
  Tool("qemu-img create -q -f vpc -o subformat=dynamic " + path + " 2040G");
  const uint64_t size = QemuVirtualSize(path);
  Tool("qemu-io -f vpc -c 'write -P 0x42 0 4096' -c 'write -P 0x43 " + std::to_string(size - 4096) +
       " 4096' " + path);
  auto dev = OpenImage(path);
  ASSERT_OK(dev);
  EXPECT_EQ((*dev)->geometry().size_bytes, size);
  EXPECT_EQ(ReadBytes(**dev, 0, 4096), std::vector<unsigned char>(4096, 0x42));
  EXPECT_EQ(ReadBytes(**dev, size - 4096, 4096), std::vector<unsigned char>(4096, 0x43));
  EXPECT_EQ(ReadBytes(**dev, 1ull << 40, 4096), std::vector<unsigned char>(4096, 0));
  dev->reset();
  EXPECT_EQ(RunVstack("check " + path).status, 0);
  // Writing through vstack keeps it readable by qemu.
  {
    auto w = OpenImage(path);
    ASSERT_OK(w);
    WriteBytes(**w, 1ull << 40, std::vector<unsigned char>(4096, 0x44));
  }
  Tool("qemu-io -f vpc -c 'read -P 0x44 1T 4096' -c 'read -P 0x42 0 4096' " + path);
}

// The block size of an image created with `options` (for fixed images, any chunk size).
uint64_t BlockSizeOf(const std::string& options) {
  if (options.find("512K") != std::string::npos) return 512 << 10;
  if (options.find("4M") != std::string::npos) return 4 << 20;
  return 2 << 20;
}

// vstack writes random content (partial blocks, runs across blocks) into images of every
// kind; qemu-img and libvhdi read the same bytes and report the same size.
TEST_F(VhdInterop, VstackImagesReadIdenticallyByQemuAndLibvhdi) {
  const char* cases[] = {
      "subformat=fixed",
      "subformat=dynamic,block_size=512K",
      "subformat=dynamic",
      "subformat=dynamic,block_size=4M",
      "subformat=dynamic,force_size=on",
      "subformat=fixed,force_size=on",
  };
  Rng rng(99);
  int n = 0;
  for (const char* options : cases) {
    for (uint64_t requested : {uint64_t{24} << 20, (uint64_t{20} << 20) + 3 * 512}) {
      const std::string path = dir_.File("v" + std::to_string(n++) + ".vhd");
      ASSERT_OK(CreateImage("vhd", path, requested, options));
      auto dev = OpenImage(path);
      ASSERT_OK(dev);
      const uint64_t size = (*dev)->geometry().size_bytes;
      std::vector<unsigned char> model(size, 0);
      for (int i = 0; i < 24; ++i) {
        const uint64_t len = (1 + rng.Below(64)) * 512;
        const uint64_t off = rng.Below((size - len) / 512 + 1) * 512;
        std::vector<unsigned char> data(len);
        rng.Fill(data.data(), len);
        WriteBytes(**dev, off, data);
        std::copy(data.begin(), data.end(), model.begin() + off);
      }
      ASSERT_OK((*dev)->Close());
      dev->reset();
      SCOPED_TRACE(std::string(options) + " " + std::to_string(requested));

      EXPECT_EQ(QemuVirtualSize(path), size);
      const std::string raw = path + ".model.raw";
      WriteAll(raw, model);
      CommandResult cmp = Tool("qemu-img compare -f vpc -F raw " + path + " " + raw);
      EXPECT_NE(cmp.output.find("Images are identical"), std::string::npos) << cmp.output;

      Vhdi vhdi(path);
      ASSERT_EQ(vhdi.error(), "");
      EXPECT_EQ(vhdi.MediaSize(), size);
      // Read block by block: libvhdi 20210425 does not clamp the last run of a sector bitmap
      // (which for blocks under 2 MiB includes the bitmap's padding) to the block, so one read
      // that starts in an unwritten run at the end of a block zero-fills into the next ones
      // (docs/layers/vhd.md, "Interoperability").
      const uint64_t chunk = BlockSizeOf(options);
      std::vector<unsigned char> got;
      for (uint64_t off = 0; off < size; off += chunk) {
        auto part = vhdi.Read(off, static_cast<size_t>(std::min(chunk, size - off)));
        got.insert(got.end(), part.begin(), part.end());
      }
      const auto diff = std::mismatch(got.begin(), got.end(), model.begin());
      EXPECT_TRUE(diff.first == got.end())
          << "libvhdi differs at offset " << (diff.first - got.begin());
      EXPECT_EQ(RunVstack("check " + path).status, 0);
    }
  }
}

// A partially written block whose unwritten sectors hold garbage: the spec (and libvhdi) read
// zeros there; so does vstack (qemu does not look at bitmaps).
TEST_F(VhdInterop, UnwrittenSectorsReadAsZerosLikeLibvhdi) {
  const std::string path = dir_.File("garbage.vhd");
  {
    auto dev = FileVhd(path, 8 << 20);
    ASSERT_OK(dev);
    WriteBytes(**dev, 0, std::vector<unsigned char>(4096, 0x11));  // sectors 0-7 of block 0
  }
  auto file = ReadAll(path);
  const uint64_t data = uint64_t{BE32(file, 1536)} * 512 + 512;
  std::fill(file.begin() + data + 4096, file.begin() + data + 8192, 0xCD);
  WriteAll(path, file);
  auto dev = OpenImage(path);
  ASSERT_OK(dev);
  auto ours = ReadBytes(**dev, 0, 8192);
  Vhdi vhdi(path);
  ASSERT_EQ(vhdi.error(), "");
  EXPECT_EQ(ours, vhdi.Read(0, 8192));
  EXPECT_EQ(ours[4096], 0);
}

// Differencing chains. qemu 7.2 cannot make them (its vpc driver has no backing files) and
// reads a child as if it were dynamic (the parent's sectors as zeros); libvhdi reads chains.

TEST_F(VhdInterop, QemuImgCannotCreateVpcChildren) {
  const std::string parent = dir_.File("qp.vhd"), child = dir_.File("qc.vhd");
  Tool("qemu-img create -q -f vpc " + parent + " 8M");
  CommandResult r =
      RunCommand("qemu-img create -q -f vpc -b " + parent + " -F vpc " + child + " 2>&1");
  // If a later qemu learns this, this test fails: then read its children here too.
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Backing file not supported"), std::string::npos) << r.output;
}

// libvhdi 20210425 (Debian 12) reads a child's sector bitmap a byte, 8 sectors (4 KiB), at a
// time: from the first set bit of a byte to the end of that byte it returns the child's stored
// sectors, so the sectors after a written one in the same 4 KiB read as the zeros the child's
// block was filled with. The format gives every sector its own bit, and vstack reads the parent
// there (docs/layers/vhd.md, "Differencing disks"). This test shows the difference on purpose:
// it fails when libvhdi changes, and then the docs and PredictLibvhdi below must change too.
TEST_F(VhdInterop, LibvhdiReadsAChildBitmapAByteAtATime) {
  const std::string base = dir_.File("byte-base.vhd"), child = dir_.File("byte-child.vhd");
  ASSERT_OK(CreateImage("vhd", base, 8 << 20));
  std::vector<unsigned char> parent_data(3 * 4096), one(512), other(512);
  rng_.Fill(parent_data.data(), parent_data.size());
  rng_.Fill(one.data(), one.size());
  rng_.Fill(other.data(), other.size());
  {
    auto dev = OpenImage(base);
    ASSERT_OK(dev);
    WriteBytes(**dev, 0, parent_data);
    ASSERT_OK((*dev)->Close());
  }
  ASSERT_EQ(RunVstack("create -f vhd -b " + base + " " + child).status, 0);
  {
    auto dev = OpenImage(child);
    ASSERT_OK(dev);
    WriteBytes(**dev, 0, one);          // sector 0: bit 0 of the first bitmap byte
    WriteBytes(**dev, 11 * 512, other);  // sector 11: bit 3 of the second
    ASSERT_OK((*dev)->Close());
  }
  auto dev = OpenImage(child);
  ASSERT_OK(dev);
  const auto ours = ReadBytes(**dev, 0, parent_data.size());
  dev->reset();
  Vhdi vparent(base), vchild(child);
  ASSERT_EQ(vparent.error(), "");
  ASSERT_EQ(vchild.error(), "");
  ASSERT_EQ(vchild.SetParent(vparent), "");
  const auto theirs = vchild.Read(0, parent_data.size());
  auto sector = [](const std::vector<unsigned char>& v, int s) {
    return std::vector<unsigned char>(v.begin() + s * 512, v.begin() + (s + 1) * 512);
  };
  const std::vector<unsigned char> zeros(512, 0);
  for (int s = 0; s < 24; ++s) {
    const std::vector<unsigned char> written = s == 0 ? one : s == 11 ? other : zeros;
    const bool child_holds = s == 0 || s == 11;
    EXPECT_EQ(sector(ours, s), child_holds ? written : sector(parent_data, s))
        << "vstack: every sector by its own bit, sector " << s;
    // libvhdi: the child's sectors from its first set bit to the end of that byte.
    const bool child_byte_part = (s >= 0 && s < 8) || (s >= 11 && s < 16);
    EXPECT_EQ(sector(theirs, s), child_byte_part ? written : sector(parent_data, s))
        << "libvhdi, sector " << s;
  }
}

// What libvhdi 20210425 reads from a child over `chain` (what vstack reads, sector for sector):
// from the first sector of each 4 KiB group that the child holds to the end of the group, the
// child's stored sectors, zeros where the child never wrote (LibvhdiReadsAChildBitmapAByteAtATime);
// every other sector as vstack reads it.
std::vector<unsigned char> PredictLibvhdi(const std::vector<unsigned char>& chain,
                                          const std::vector<bool>& child_has) {
  std::vector<unsigned char> out = chain;
  for (size_t group = 0; group * 8 < child_has.size(); ++group) {
    const size_t end = std::min(group * 8 + 8, child_has.size());
    size_t s = group * 8;
    while (s < end && !child_has[s]) ++s;  // before the byte's first set bit: the parent's
    for (; s < end; ++s) {
      if (!child_has[s]) std::fill_n(out.begin() + static_cast<ptrdiff_t>(s * 512), 512, 0);
    }
  }
  return out;
}

// vstack creates a chain (base, then child via the CLI) and writes random content into both;
// libvhdi, with the parent attached, reads the child as vstack does, except for its byte-wide
// reading of the child's bitmap (above), which is predicted sector for sector.
TEST_F(VhdInterop, VstackChainsReadIdenticallyByLibvhdi) {
  Rng rng(12);
  int n = 0;
  for (const char* options : {"block_size=512K", "block_size=2M"}) {
    for (uint64_t requested : {uint64_t{24} << 20, (uint64_t{20} << 20) + 3 * 512}) {
      SCOPED_TRACE(std::string(options) + " " + std::to_string(requested));
      const std::string base = dir_.File("cb" + std::to_string(n) + ".vhd");
      const std::string child = dir_.File("cc" + std::to_string(n++) + ".vhd");
      ASSERT_OK(CreateImage("vhd", base, requested, options));
      std::vector<unsigned char> model;
      auto write_random = [&](const std::string& path, int writes) {
        auto dev = OpenImage(path);
        ASSERT_OK(dev);
        const uint64_t size = (*dev)->geometry().size_bytes;
        model.resize(size, 0);
        for (int i = 0; i < writes; ++i) {
          const uint64_t len = (1 + rng.Below(64)) * 512;
          const uint64_t off = rng.Below((size - len) / 512 + 1) * 512;
          std::vector<unsigned char> data(len);
          rng.Fill(data.data(), len);
          WriteBytes(**dev, off, data);
          std::copy(data.begin(), data.end(), model.begin() + static_cast<ptrdiff_t>(off));
        }
        ASSERT_OK((*dev)->Close());
      };
      // One 4 KiB group of the parent's data of which the child then writes one sector: the
      // sectors after it are where libvhdi and vstack differ.
      auto write_at = [&](const std::string& path, uint64_t off, uint64_t len) {
        auto dev = OpenImage(path);
        ASSERT_OK(dev);
        std::vector<unsigned char> data(len);
        rng.Fill(data.data(), len);
        WriteBytes(**dev, off, data);
        std::copy(data.begin(), data.end(), model.begin() + static_cast<ptrdiff_t>(off));
        ASSERT_OK((*dev)->Close());
      };
      write_random(base, 24);
      write_at(base, 1 << 20, 4096);
      CommandResult c = RunVstack("create -f vhd -b " + base + " -F vhd " + child);
      ASSERT_EQ(c.status, 0) << c.output;
      write_random(child, 24);
      write_at(child, (1 << 20) + 1024, 512);
      auto dev = OpenImage(child);
      ASSERT_OK(dev);
      const uint64_t size = (*dev)->geometry().size_bytes;
      const auto ours = ReadBytes(**dev, 0, size);
      dev->reset();
      ASSERT_TRUE(ours == model) << "vstack does not read what was written";

      Vhdi parent(base), vchild(child);
      ASSERT_EQ(parent.error(), "");
      ASSERT_EQ(vchild.error(), "");
      ASSERT_EQ(vchild.SetParent(parent), "");
      EXPECT_EQ(vchild.MediaSize(), size);
      const uint64_t chunk = BlockSizeOf(options);  // block by block, as above
      std::vector<unsigned char> got;
      for (uint64_t off = 0; off < size; off += chunk) {
        auto part = vchild.Read(off, static_cast<size_t>(std::min(chunk, size - off)));
        got.insert(got.end(), part.begin(), part.end());
      }
      auto own = OpenImage("vhd:parent=none+file:" + child);
      ASSERT_OK(own);
      std::vector<Extent> held;
      ASSERT_OK((*own)->MapExtents(0, size, &held));
      own->reset();
      std::vector<bool> child_has(size / 512, false);
      for (const Extent& e : held) {
        for (uint64_t s = e.offset / 512; e.flags == 0 && s < (e.offset + e.length) / 512; ++s) {
          child_has[s] = true;
        }
      }
      const auto predicted = PredictLibvhdi(ours, child_has);
      uint64_t differ = 0;
      for (uint64_t s = 0; s < size / 512; ++s) {
        const auto a = got.begin() + static_cast<ptrdiff_t>(s * 512);
        const auto p = predicted.begin() + static_cast<ptrdiff_t>(s * 512);
        EXPECT_TRUE(std::equal(a, a + 512, p)) << "libvhdi differs from the model at sector " << s;
        const auto o = ours.begin() + static_cast<ptrdiff_t>(s * 512);
        differ += std::equal(p, p + 512, o) ? 0 : 1;
      }
      EXPECT_GE(differ, 5u) << "at least the 5 sectors after the one written at 1 MiB + 1 KiB";
      EXPECT_EQ(RunVstack("check " + child).status, 0);
    }
  }
}

// qemu reads a vstack child as a dynamic disk of its own: `qemu-img info` shows no backing
// file, and `qemu-img convert` gives exactly the child's own sectors with the parent's as
// zeros (vstack's `parent=none` view), not the chain's contents (vstack's and libvhdi's).
TEST_F(VhdInterop, QemuReadsAVstackChildWithoutItsParent) {
  const std::string base = dir_.File("rb.vhd"), child = dir_.File("rc.vhd");
  ASSERT_OK(CreateImage("vhd", base, 8 << 20));
  Rng rng(5);
  {
    auto dev = OpenImage(base);
    ASSERT_OK(dev);
    std::vector<unsigned char> data((*dev)->geometry().size_bytes);
    rng.Fill(data.data(), data.size());
    WriteBytes(**dev, 0, data);
    ASSERT_OK((*dev)->Close());
  }
  CommandResult c = RunVstack("create -f vhd -b rb.vhd -F vhd " + child);
  ASSERT_EQ(c.status, 0) << c.output;
  {
    auto dev = OpenImage(child);
    ASSERT_OK(dev);
    for (uint64_t off : {uint64_t{1536}, uint64_t{3} << 20, (uint64_t{5} << 20) + 4096}) {
      std::vector<unsigned char> data(6144);
      rng.Fill(data.data(), data.size());
      WriteBytes(**dev, off, data);
    }
    ASSERT_OK((*dev)->Close());
  }
  const auto info = nlohmann::json::parse(
      Tool("qemu-img info -f vpc --output=json --backing-chain " + child).output);
  ASSERT_EQ(info.size(), 1u) << "qemu sees a chain of one: " << info.dump();
  EXPECT_EQ(info[0]["format"], "vpc");
  EXPECT_FALSE(info[0].contains("backing-filename")) << info.dump();

  const std::string qemu = dir_.File("rc.qemu.raw"), own = dir_.File("rc.own.raw"),
                    flat = dir_.File("rc.flat.raw");
  Tool("qemu-img convert -f vpc -O raw " + child + " " + qemu);
  ASSERT_EQ(RunVstack("convert -O raw vhd:parent=none+file:" + child + " " + own).status, 0);
  ASSERT_EQ(RunVstack("convert -O raw " + child + " " + flat).status, 0);
  const auto q = ReadAll(qemu), o = ReadAll(own), f = ReadAll(flat);
  EXPECT_TRUE(q == o) << "qemu reads the child's own sectors, the parent's as zeros";
  ASSERT_EQ(q.size(), f.size());
  EXPECT_FALSE(q == f) << "if qemu learns differencing VHDs, read chains with it here";
  EXPECT_TRUE(IsZero(q.data(), 1536)) << "sectors before the child's write are the parent's";
  EXPECT_FALSE(IsZero(f.data(), 512));
  EXPECT_TRUE(
      std::equal(q.begin() + (3 << 20), q.begin() + (3 << 20) + 6144, f.begin() + (3 << 20)))
      << "the child's own data reads the same";
}

// qemu-io writes whole blocks of random content into a vstack child (qemu treats it as a
// dynamic disk): vstack reads those blocks as qemu-io wrote them and the other blocks from the
// parent, where qemu reads zeros.
TEST_F(VhdInterop, QemuIoWritesIntoAVstackChild) {
  const std::string base = dir_.File("qb.vhd"), child = dir_.File("qch.vhd");
  ASSERT_OK(CreateImage("vhd", base, 16 << 20));
  Rng rng(7);
  std::vector<unsigned char> base_data(16 << 20);
  {
    auto dev = OpenImage(base);
    ASSERT_OK(dev);
    base_data.resize((*dev)->geometry().size_bytes);
    rng.Fill(base_data.data(), base_data.size());
    WriteBytes(**dev, 0, base_data);
  }
  ASSERT_OK(CreateImage("vhd", child, 0, "backing_file=qb.vhd"));
  std::vector<unsigned char> blocks(4 << 20);
  rng.Fill(blocks.data(), blocks.size());
  const std::string src = dir_.File("qsrc.bin");
  WriteAll(src, blocks);
  Tool("qemu-io -f vpc -c 'write -s " + src + " 2M 4M' " + child);
  auto dev = OpenImage(child);
  ASSERT_OK(dev);
  EXPECT_EQ(ReadBytes(**dev, 2 << 20, 4 << 20), blocks);
  EXPECT_EQ(ReadBytes(**dev, 0, 2 << 20),
            std::vector<unsigned char>(base_data.begin(), base_data.begin() + (2 << 20)));
  EXPECT_EQ(ReadBytes(**dev, 6 << 20, 1 << 20),
            std::vector<unsigned char>(base_data.begin() + (6 << 20),
                                       base_data.begin() + (7 << 20)));
  dev->reset();
  EXPECT_EQ(RunVstack("check " + child).status, 0) << RunVstack("check " + child).output;
}

}  // namespace
}  // namespace vstack::testing
