// The on-disk structures of a VHDX file ([MS-VHDX] v1.0): the file identifier, the two
// headers, the region table, the metadata table and its items, and BAT entries. Everything is
// little-endian; GUIDs are stored in Microsoft's mixed-endian layout. Decoders check every
// field and return errors naming the field and its byte offset in the file.
//
// File layout (what `vstack create` and qemu-img write):
//   0      file identifier "vhdxfile" + creator (64 KiB)
//   64K    header 1, 128K header 2 (4 KiB each, CRC-32C, the highest valid sequence wins)
//   192K   region table 1, 256K region table 2 (64 KiB each, identical)
//   1M     log (log_size), then the BAT region and the metadata region (1 MiB aligned)
//   ...    payload blocks (block_size each, 1 MiB aligned)
#ifndef VSTACK_FORMATS_VHDX_VHDX_FORMAT_H_
#define VSTACK_FORMATS_VHDX_VHDX_FORMAT_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lib/errors.h"

namespace vstack::vhdx {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * 1024;
inline constexpr uint64_t kHeaderOffset[2] = {64 * kKiB, 128 * kKiB};
inline constexpr uint64_t kRegionTableOffset[2] = {192 * kKiB, 256 * kKiB};
inline constexpr size_t kHeaderSize = 4096;
inline constexpr size_t kRegionTableSize = 64 * kKiB;
inline constexpr size_t kMetadataTableSize = 64 * kKiB;
inline constexpr uint32_t kMaxTableEntries = 2047;  // region and metadata tables
inline constexpr uint64_t kMaxVirtualSize = 64ull << 40;
inline constexpr uint32_t kMinBlockSize = 1 << 20;
inline constexpr uint32_t kMaxBlockSize = 256 << 20;
inline constexpr uint64_t kSectorsPerBitmapBlock = 1ull << 23;  // one 1 MiB bitmap block

// `v` rounded up to a multiple of `a` (> 0): the format's 1 MiB placement of every structure.
inline constexpr uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// A GUID as the 16 bytes stored on disk.
struct Guid {
  std::array<uint8_t, 16> bytes{};

  // From the text form's fields (data1-data2-data3-data4).
  static Guid FromFields(uint32_t d1, uint16_t d2, uint16_t d3, uint64_t d4_big_endian);
  static Guid Random();  // version 4
  bool IsZero() const;
  std::string Text() const;  // "2dc27766-f623-4200-9d64-115e9bfd4a08"
  bool operator==(const Guid&) const = default;
};

extern const Guid kBatRegionGuid;
extern const Guid kMetadataRegionGuid;
extern const Guid kFileParametersGuid;
extern const Guid kVirtualDiskSizeGuid;
extern const Guid kPage83DataGuid;
extern const Guid kLogicalSectorSizeGuid;
extern const Guid kPhysicalSectorSizeGuid;
extern const Guid kParentLocatorGuid;

// CRC-32C of `data` with the 4 bytes at `checksum_offset` taken as zero (how every VHDX
// checksum is defined).
uint32_t Checksum(std::span<const uint8_t> data, size_t checksum_offset);

struct Header {
  uint64_t sequence = 0;
  Guid file_write;
  Guid data_write;
  Guid log_guid;  // zero: the log is empty
  uint16_t log_version = 0;
  uint16_t version = 1;
  uint32_t log_length = 0;
  uint64_t log_offset = 0;
};
// The 4 KiB header with its checksum.
std::array<uint8_t, kHeaderSize> EncodeHeader(const Header& h);
// Decodes the header at `file_offset`; checks signature, checksum, versions and the log's
// placement (1 MiB aligned, past the region tables, inside `file_size`).
Result<Header> DecodeHeader(std::span<const uint8_t, kHeaderSize> b, uint64_t file_offset,
                            uint64_t file_size);

struct Region {
  Guid id;
  uint64_t offset = 0;
  uint32_t length = 0;
  bool required = false;
};
// The 64 KiB region table with its checksum.
std::vector<uint8_t> EncodeRegionTable(const std::vector<Region>& regions);
// Checks signature, checksum, entry count, each region's alignment and that it lies inside
// `file_size` past the region tables; unknown regions marked required are refused, as the
// spec says.
Result<std::vector<Region>> DecodeRegionTable(std::span<const uint8_t> b, uint64_t file_offset,
                                              uint64_t file_size);

// The metadata items vstack reads and writes.
struct Metadata {
  uint32_t block_size = 32 << 20;
  bool leave_blocks_allocated = false;
  bool has_parent = false;
  uint64_t virtual_size = 0;
  Guid page83;
  uint32_t logical_sector = 512;
  uint32_t physical_sector = 4096;
};
// The metadata region's first 64 KiB (table + items); the rest of the region is zeros.
std::vector<uint8_t> EncodeMetadata(const Metadata& m);
// Decodes the table and items from the start of the metadata region (`b` holds at least the
// 64 KiB table; items past `b` are an error). `region_offset` is for messages. Checks each
// value's range; an unknown required item or a parent locator is refused.
Result<Metadata> DecodeMetadata(std::span<const uint8_t> b, uint64_t region_offset,
                                uint32_t region_length);

// BAT entries: state in bits 0-2, file offset in MiB in bits 20-63.
enum PayloadState : uint8_t {
  kNotPresent = 0,
  kUndefined = 1,
  kZero = 2,
  kUnmapped = 3,
  kFullyPresent = 6,
  kPartiallyPresent = 7,
};
inline constexpr uint8_t kBitmapPresent = 6;
inline uint8_t EntryState(uint64_t e) { return static_cast<uint8_t>(e & 7); }
inline uint64_t EntryOffset(uint64_t e) { return (e >> 20) << 20; }
inline uint64_t MakeEntry(uint8_t state, uint64_t offset) { return (offset >> 20 << 20) | state; }
std::string PayloadStateName(uint8_t state);

// Where each payload block's entry sits in the BAT, which interleaves one sector-bitmap entry
// after every chunk_ratio payload entries.
struct BatLayout {
  uint64_t virtual_size = 0;
  uint32_t block_size = 0;
  uint32_t logical_sector = 0;
  uint64_t chunk_ratio = 0;     // payload blocks per sector-bitmap block
  uint64_t payload_blocks = 0;  // ceil(virtual_size / block_size)
  uint64_t entries = 0;         // payload + sector-bitmap entries

  static BatLayout For(uint64_t virtual_size, uint32_t block_size, uint32_t logical_sector);
  uint64_t Index(uint64_t block) const { return block + block / chunk_ratio; }
  bool IsBitmapIndex(uint64_t index) const { return index % (chunk_ratio + 1) == chunk_ratio; }
};

}  // namespace vstack::vhdx

#endif  // VSTACK_FORMATS_VHDX_VHDX_FORMAT_H_
