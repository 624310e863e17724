// The dynamic-disk header (1024 bytes at footer.data_offset, big-endian): parsing with
// validation, serialisation with the checksum, and the sizes derived from it.
#ifndef VSTACK_FORMATS_VHD_VHD_HEADER_H_
#define VSTACK_FORMATS_VHD_VHD_HEADER_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "formats/vhd/vhd_footer.h"
#include "lib/errors.h"

namespace vstack::vhd {

inline constexpr uint32_t kHeaderSize = 1024;
inline constexpr uint32_t kUnallocated = 0xFFFFFFFF;  // a BAT entry for a block not in the file
// Block sizes this implementation reads (any power of two in range); it creates 512 KiB to
// 64 MiB, default 2 MiB.
inline constexpr uint32_t kMinBlockSize = 512;
inline constexpr uint32_t kMaxBlockSize = 256u << 20;
inline constexpr uint32_t kMinCreateBlockSize = 512u << 10;
inline constexpr uint32_t kMaxCreateBlockSize = 64u << 20;
inline constexpr uint32_t kDefaultBlockSize = 2u << 20;
inline constexpr size_t kParentNameUnits = 256;  // the parent name field: 512 bytes

struct ParentLocator {
  uint32_t platform_code = 0;
  uint32_t data_space = 0;   // sectors per the spec, bytes in practice
  uint32_t data_length = 0;  // bytes
  uint64_t data_offset = 0;  // absolute file offset
};

struct DynamicHeader {
  uint64_t data_offset = kNoDataOffset;
  uint64_t table_offset = 0;  // absolute byte offset of the BAT
  uint32_t version = kFormatVersion;
  uint32_t max_table_entries = 0;
  uint32_t block_size = kDefaultBlockSize;
  uint32_t checksum = 0;  // as stored; Serialize computes it
  std::array<uint8_t, 16> parent_uuid{};
  uint32_t parent_timestamp = 0;
  std::u16string parent_name;  // differencing only: up to 256 code units, UTF-16 big-endian
  std::array<ParentLocator, 8> locators{};

  // Bytes of the sector bitmap in front of each block: one bit per sector, rounded up to a
  // whole sector.
  uint32_t bitmap_bytes() const { return BitmapBytes(block_size); }
  // Bytes the BAT occupies in the file, padded to a whole sector.
  uint64_t bat_bytes() const {
    return (uint64_t{max_table_entries} * 4 + kSectorSize - 1) / kSectorSize * kSectorSize;
  }
  static uint32_t BitmapBytes(uint32_t block_size) {
    const uint32_t bytes = (block_size / kSectorSize + 7) / 8;
    return (bytes + kSectorSize - 1) / kSectorSize * kSectorSize;
  }
};

// Parses a header found at file offset `at`. Validates cookie, checksum (unless
// `verify_checksum` is false), data offset, version, table offset alignment and block size.
// Sizes against the footer and the file are checked by the image loader.
Result<DynamicHeader> ParseHeader(std::span<const uint8_t, kHeaderSize> bytes, uint64_t at,
                                  bool verify_checksum = true);

// Writes `h` into `out` with a freshly computed checksum.
void SerializeHeader(const DynamicHeader& h, std::span<uint8_t, kHeaderSize> out);

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_HEADER_H_
