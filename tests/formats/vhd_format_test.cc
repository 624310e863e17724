// The VHD structures on their own: checksum, footer and header round trips and validation,
// the CHS geometry rules (values from the spec's algorithm and from qemu-img), bitmaps.
#include <gtest/gtest.h>

#include <cstring>

#include "formats/vhd/vhd_bat.h"
#include "formats/vhd/vhd_bitmap.h"
#include "formats/vhd/vhd_footer.h"
#include "formats/vhd/vhd_header.h"

namespace vstack::vhd {
namespace {

TEST(VhdChs, SpecAlgorithmMatchesTheNotesTable) {
  struct Case {
    uint64_t bytes;
    Chs chs;
  } cases[] = {
      {20ull << 20, {602, 4, 17}},         {(100ull << 20) + 1536, {1003, 12, 17}},
      {1ull << 30, {2080, 16, 63}},        {10ull << 30, {20805, 16, 63}},
      {32ull << 30, {16448, 16, 255}},     {127ull << 30, {65278, 16, 255}},
      {136899993600ull, {65535, 16, 255}}, {2040ull << 30, {65535, 16, 255}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ChsForSectors(c.bytes / 512), c.chs) << c.bytes;
  }
  // The comparison is >= 65535*16*63 sectors, not >.
  EXPECT_EQ(ChsForSectors(65535ull * 16 * 63).sectors, 255);
  EXPECT_EQ(ChsForSectors(65535ull * 16 * 63 - 1).sectors, 63);
}

TEST(VhdChs, RoundUpAgreesWithQemuImg) {
  Chs chs;
  EXPECT_EQ(RoundUpToChs(1ull << 30, &chs), 1073995776u);
  EXPECT_EQ(chs, (Chs{2081, 16, 63}));
  EXPECT_EQ(RoundUpToChs((100ull << 20) + 1536, &chs), 104865792u);
  EXPECT_EQ(chs, (Chs{1004, 12, 17}));
  EXPECT_EQ(RoundUpToChs(1000, &chs), 34816u);
  EXPECT_EQ(chs, (Chs{1, 4, 17}));
  // Beyond what CHS can describe: the sector-rounded size and the maximum geometry.
  EXPECT_EQ(RoundUpToChs(200ull << 30, &chs), 200ull << 30);
  EXPECT_TRUE(chs.IsMax());
  // Never smaller than asked, and exactly covered by its geometry.
  for (uint64_t s : {512ull, 513ull, 68ull * 512 + 1, 1ull << 20, 5ull << 30, 100000000000ull}) {
    const uint64_t r = RoundUpToChs(s, &chs);
    EXPECT_GE(r, s);
    EXPECT_EQ(chs.TotalSectors() * 512, r) << s;
  }
}

Footer SampleFooter() {
  Footer f;
  f.data_offset = 512;
  f.timestamp = 12345;
  f.creator_app = {'q', 'e', 'm', 'u'};
  f.creator_version = 0x00050003;
  f.creator_os = 0x5769326B;
  f.original_size = f.current_size = 1073995776;
  f.geometry = {2081, 16, 63};
  f.disk_type = 3;
  for (int i = 0; i < 16; ++i) f.uuid[i] = static_cast<uint8_t>(i + 1);
  return f;
}

TEST(VhdFooter, RoundTripAndQemuBytes) {
  std::array<uint8_t, 512> b{};
  SerializeFooter(SampleFooter(), b);
  // The first bytes of qemu-img 7.2's 1 GiB dynamic image (`qemu-img create -f vpc -o
  // subformat=dynamic x.vhd 1G`), up to the
  // time stamp and from the creator on.
  const uint8_t head[] = {'c', 'o', 'n', 'e', 'c', 't', 'i', 'x', 0, 0, 0, 2,
                          0,   1,   0,   0,   0,   0,   0,   0,   0, 0, 2, 0};
  EXPECT_EQ(std::memcmp(b.data(), head, sizeof head), 0);
  const uint8_t tail[] = {'q',  'e',  'm',  'u', 0,    5,    0,    3,    'W', 'i', '2', 'k',
                          0,    0,    0,    0,   0x40, 0x03, 0xe0, 0,    0,   0,   0,   0,
                          0x40, 0x03, 0xe0, 0,   0x08, 0x21, 0x10, 0x3f, 0,   0,   0,   3};
  EXPECT_EQ(std::memcmp(b.data() + 28, tail, sizeof tail), 0);
  auto f = ParseFooter(b, 1000);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->current_size, 1073995776u);
  EXPECT_EQ(f->geometry, (Chs{2081, 16, 63}));
  EXPECT_EQ(f->CreatorText(), "qemu");
  EXPECT_EQ(f->checksum, VhdChecksum(b, 64));
  EXPECT_EQ(f->checksum >> 16, 0xFFFFu) << "checksums of real footers look like 0xFFFFxxxx";
}

// Every field is validated, and the error names it and its offset in the file.
TEST(VhdFooter, RejectsBadFieldsNamingFieldAndOffset) {
  struct Case {
    const char* what;
    size_t at;
    std::vector<uint8_t> bytes;
    bool fix_checksum;
    const char* needle;
  } cases[] = {
      {"cookie", 0, {'x'}, true, "no 'conectix' cookie (field at offset 1000)"},
      {"checksum", 64, {0, 0, 0, 0}, false, "checksum mismatch: stored 0x0, computed"},
      {"features", 8, {0, 0, 0, 6}, true, "unknown feature bits 0x6 (field at offset 1008)"},
      {"version",
       12,
       {0, 2, 0, 0},
       true,
       "unsupported format version 0x20000 (expected 0x10000) (field at offset 1012)"},
      {"type", 60, {0, 0, 0, 5}, true, "invalid disk type 5"},
      {"differencing", 60, {0, 0, 0, 4}, true, "differencing disks (type 4) are not supported"},
      {"data offset", 16, {0, 0, 0, 0, 0, 0, 0, 7}, true, "invalid header offset 0x7"},
      {"size", 48, {0, 0, 0, 0, 0, 0, 0, 0}, true, "current size 0 is below one sector"},
      {"too big", 48, {0, 0, 2, 0, 0, 0, 0, 0}, true, "exceeds the 2040 GiB limit"},
  };
  for (const Case& c : cases) {
    std::array<uint8_t, 512> b{};
    SerializeFooter(SampleFooter(), b);
    std::memcpy(b.data() + c.at, c.bytes.data(), c.bytes.size());
    if (c.fix_checksum) {
      const uint32_t sum = VhdChecksum(b, 64);
      b[64] = sum >> 24;
      b[65] = sum >> 16;
      b[66] = sum >> 8;
      b[67] = sum;
    }
    auto f = ParseFooter(b, 1000);
    ASSERT_FALSE(f) << c.what;
    EXPECT_NE(f.error().message.find(c.needle), std::string::npos)
        << c.what << ": " << f.error().message;
  }
}

TEST(VhdFooter, FixedDiskAcceptsBothNoneEncodingsAndBlktapHiddenByte) {
  Footer f = SampleFooter();
  f.disk_type = 2;
  for (uint64_t none : {kNoDataOffset, kNoDataOffset32}) {
    f.data_offset = none;
    std::array<uint8_t, 512> b{};
    SerializeFooter(f, b);
    EXPECT_TRUE(ParseFooter(b, 0)) << none;
  }
  f.data_offset = 512;
  std::array<uint8_t, 512> b{};
  SerializeFooter(f, b);
  EXPECT_FALSE(ParseFooter(b, 0)) << "a fixed disk has no header";
  // blktap sets byte 85 (hidden) without updating the checksum.
  f.data_offset = kNoDataOffset;
  SerializeFooter(f, b);
  b[85] = 1;
  auto hidden = ParseFooter(b, 0);
  ASSERT_TRUE(hidden) << hidden.error().message;
  EXPECT_EQ(hidden->hidden, 1);
}

TEST(VhdFooter, WarningsForInformationalFields) {
  Footer f = SampleFooter();
  f.features = 0;
  f.saved_state = 7;
  f.geometry = {65000, 16, 63};
  f.uuid = {};
  auto w = FooterWarnings(f, 0);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_NE(w[0].find("reserved feature bit"), std::string::npos);
  EXPECT_NE(w[1].find("saved state is 7"), std::string::npos);
  EXPECT_NE(w[2].find("geometry 65000/16/63 covers more"), std::string::npos);
  EXPECT_NE(w[3].find("unique id is all zeros"), std::string::npos);
}

TEST(VhdHeader, RoundTripAndValidation) {
  DynamicHeader h;
  h.table_offset = 1536;
  h.max_table_entries = 513;
  h.block_size = 2 << 20;
  std::array<uint8_t, 1024> b{};
  SerializeHeader(h, b);
  EXPECT_EQ(std::memcmp(b.data(), "cxsparse", 8), 0);
  auto p = ParseHeader(b, 512);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->max_table_entries, 513u);
  EXPECT_EQ(p->bitmap_bytes(), 512u);
  EXPECT_EQ(p->bat_bytes(), 2560u);
  for (uint32_t bad : {0u, 3u << 20, 256u}) {
    h.block_size = bad;
    SerializeHeader(h, b);
    auto e = ParseHeader(b, 512);
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(
        e.error().message.find("block size " + std::to_string(bad) + " is not a power of two"),
        std::string::npos);
    EXPECT_NE(e.error().message.find("(field at offset 544)"), std::string::npos)
        << e.error().message;
  }
  h.block_size = 2 << 20;
  SerializeHeader(h, b);
  b[40] ^= 1;  // parent uuid: checksummed
  auto sum = ParseHeader(b, 512);
  ASSERT_FALSE(sum);
  EXPECT_EQ(sum.error().code, make_error_code(Errc::kChecksumMismatch));
  EXPECT_NE(sum.error().message.find("(field at offset 548)"), std::string::npos);
  EXPECT_TRUE(ParseHeader(b, 512, /*verify_checksum=*/false));
}

TEST(VhdHeader, BitmapSizes) {
  EXPECT_EQ(DynamicHeader::BitmapBytes(512), 512u);
  EXPECT_EQ(DynamicHeader::BitmapBytes(512 << 10), 512u);
  EXPECT_EQ(DynamicHeader::BitmapBytes(2 << 20), 512u);
  EXPECT_EQ(DynamicHeader::BitmapBytes(4 << 20), 1024u);
  EXPECT_EQ(DynamicHeader::BitmapBytes(64 << 20), 16384u);
}

TEST(VhdBitmap, MostSignificantBitFirst) {
  uint8_t bits[4] = {};
  SetBits(bits, 0, 1);
  EXPECT_EQ(bits[0], 0x80);
  SetBits(bits, 6, 12);  // sectors 6..17
  EXPECT_EQ(bits[0], 0x83);
  EXPECT_EQ(bits[1], 0xFF);
  EXPECT_EQ(bits[2], 0xC0);
  EXPECT_TRUE(AllSet(bits, 6, 12));
  EXPECT_FALSE(AllSet(bits, 5, 2));
  EXPECT_EQ(RunLength(bits, 6, 32), 12u);
  EXPECT_EQ(RunLength(bits, 18, 32), 14u);
  EXPECT_EQ(CountSet(bits, 32), 13u);
}

TEST(VhdBat, PlacementAlignsDataAndSerialisesPadding) {
  EXPECT_EQ(PlaceBlock(4096, 512), 7680u);  // data at 8192
  EXPECT_EQ(PlaceBlock(3584, 512), 3584u);  // data at 4096, no gap
  EXPECT_EQ(PlaceBlock(3585, 1024), 7168u);
  Bat bat(std::vector<uint32_t>(130, kUnallocated));
  bat.Publish(129, 0x01020304, 0);
  std::array<uint8_t, 512> s{};
  bat.SerializeSector(1, s);
  EXPECT_EQ(s[4], 1);
  EXPECT_EQ(s[7], 4);
  EXPECT_EQ(s[0], 0xFF);
  EXPECT_EQ(s[511], 0xFF) << "padding past the last entry is 0xFF, as qemu writes";
}

}  // namespace
}  // namespace vstack::vhd
