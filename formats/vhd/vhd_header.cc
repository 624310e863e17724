#include "formats/vhd/vhd_header.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "formats/vhd/vhd_field_error.h"
#include "lib/endian.h"

namespace vstack::vhd {
namespace {

constexpr size_t kHeaderCookieAt = 0, kHeaderDataOffsetAt = 8, kTableOffsetAt = 16,
                 kHeaderVersionAt = 24, kMaxEntriesAt = 28, kBlockSizeAt = 32,
                 kHeaderChecksumAt = 36, kParentUuidAt = 40, kParentTimestampAt = 56,
                 kParentNameAt = 64, kLocatorsAt = 576, kLocatorSize = 24;
constexpr char kHeaderCookie[8] = {'c', 'x', 's', 'p', 'a', 'r', 's', 'e'};

Error BadHeader(Errc code, uint64_t at, size_t field_at, const std::string& what) {
  return FieldError(code, "VHD dynamic header", at, field_at, what);
}

}  // namespace

Result<DynamicHeader> ParseHeader(std::span<const uint8_t, kHeaderSize> b, uint64_t at,
                                  bool verify_checksum) {
  const uint8_t* p = b.data();
  if (std::memcmp(p + kHeaderCookieAt, kHeaderCookie, sizeof kHeaderCookie) != 0) {
    return BadHeader(Errc::kCorruption, at, kHeaderCookieAt, "no 'cxsparse' cookie");
  }
  DynamicHeader h;
  h.checksum = LoadBE32(p + kHeaderChecksumAt);
  const uint32_t computed = VhdChecksum(b, kHeaderChecksumAt);
  if (verify_checksum && computed != h.checksum) {
    return BadHeader(
        Errc::kChecksumMismatch, at, kHeaderChecksumAt,
        "checksum mismatch: stored " + Hex(h.checksum) + ", computed " + Hex(computed));
  }
  h.data_offset = LoadBE64(p + kHeaderDataOffsetAt);
  if (h.data_offset != kNoDataOffset && h.data_offset != kNoDataOffset32) {
    return BadHeader(Errc::kCorruption, at, kHeaderDataOffsetAt,
                     "data offset is " + Hex(h.data_offset) + " (expected 0xffffffffffffffff)");
  }
  h.table_offset = LoadBE64(p + kTableOffsetAt);
  if (h.table_offset % kSectorSize != 0 || h.table_offset == 0) {
    return BadHeader(
        Errc::kCorruption, at, kTableOffsetAt,
        "BAT offset " + std::to_string(h.table_offset) + " is not a non-zero multiple of 512");
  }
  h.version = LoadBE32(p + kHeaderVersionAt);
  if (h.version != kFormatVersion) {
    return BadHeader(Errc::kCorruption, at, kHeaderVersionAt,
                     "unsupported header version " + Hex(h.version) + " (expected 0x10000)");
  }
  h.max_table_entries = LoadBE32(p + kMaxEntriesAt);
  h.block_size = LoadBE32(p + kBlockSizeAt);
  if (h.block_size == 0 || (h.block_size & (h.block_size - 1)) != 0 ||
      h.block_size < kMinBlockSize || h.block_size > kMaxBlockSize) {
    return BadHeader(Errc::kCorruption, at, kBlockSizeAt,
                     "block size " + std::to_string(h.block_size) +
                         " is not a power of two between 512 bytes and 256 MiB");
  }
  std::memcpy(h.parent_uuid.data(), p + kParentUuidAt, 16);
  h.parent_timestamp = LoadBE32(p + kParentTimestampAt);
  for (size_t i = 0; i < kParentNameUnits; ++i) {
    const auto unit = static_cast<char16_t>(p[kParentNameAt + 2 * i] << 8 |
                                            p[kParentNameAt + 2 * i + 1]);
    if (unit == 0) break;
    h.parent_name.push_back(unit);
  }
  for (size_t i = 0; i < h.locators.size(); ++i) {
    const uint8_t* l = p + kLocatorsAt + i * kLocatorSize;
    h.locators[i] = ParentLocator{LoadBE32(l), LoadBE32(l + 4), LoadBE32(l + 8), LoadBE64(l + 16)};
  }
  return h;
}

void SerializeHeader(const DynamicHeader& h, std::span<uint8_t, kHeaderSize> out) {
  uint8_t* p = out.data();
  std::memset(p, 0, kHeaderSize);
  std::memcpy(p + kHeaderCookieAt, kHeaderCookie, sizeof kHeaderCookie);
  StoreBE64(p + kHeaderDataOffsetAt, h.data_offset);
  StoreBE64(p + kTableOffsetAt, h.table_offset);
  StoreBE32(p + kHeaderVersionAt, h.version);
  StoreBE32(p + kMaxEntriesAt, h.max_table_entries);
  StoreBE32(p + kBlockSizeAt, h.block_size);
  std::memcpy(p + kParentUuidAt, h.parent_uuid.data(), 16);
  StoreBE32(p + kParentTimestampAt, h.parent_timestamp);
  for (size_t i = 0; i < h.parent_name.size() && i < kParentNameUnits; ++i) {
    p[kParentNameAt + 2 * i] = static_cast<uint8_t>(h.parent_name[i] >> 8);
    p[kParentNameAt + 2 * i + 1] = static_cast<uint8_t>(h.parent_name[i] & 0xFF);
  }
  for (size_t i = 0; i < h.locators.size(); ++i) {
    uint8_t* l = p + kLocatorsAt + i * kLocatorSize;
    StoreBE32(l, h.locators[i].platform_code);
    StoreBE32(l + 4, h.locators[i].data_space);
    StoreBE32(l + 8, h.locators[i].data_length);
    StoreBE64(l + 16, h.locators[i].data_offset);
  }
  StoreBE32(p + kHeaderChecksumAt, VhdChecksum(out, kHeaderChecksumAt));
}

}  // namespace vstack::vhd
