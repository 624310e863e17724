// The Block Allocation Table of a dynamic VHD, held in memory, and where new blocks go.
//
// Entries are big-endian u32 sector numbers of each block's bitmap (kUnallocated = not in the
// file). In memory every entry is an atomic, so queues on several threads look blocks up
// without a lock; a block's flags (full bitmap, unusable entry) are published before its
// entry. Only the allocation commit changes entries (docs/layers/vhd.md, "Write order").
#ifndef VSTACK_FORMATS_VHD_VHD_BAT_H_
#define VSTACK_FORMATS_VHD_VHD_BAT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "formats/vhd/vhd_header.h"

namespace vstack::vhd {

inline constexpr uint32_t kEntriesPerBatSector = kSectorSize / 4;
// Data areas of new blocks start on this boundary (the bitmap sits just before it).
inline constexpr uint64_t kDataAlignment = 4096;
// The highest byte offset a block may start at: BAT entries are 32-bit sector numbers.
inline constexpr uint64_t kMaxBlockStart = uint64_t{kUnallocated - 1} * kSectorSize;

class Bat {
 public:
  enum Flag : uint8_t {
    kFull = 1,      // every bitmap bit is set on disk: data I/O needs no bitmap
    kUnusable = 2,  // the entry is corrupt (opened for check): data I/O fails
  };

  // REQUIRES: entries.size() == the header's max_table_entries.
  explicit Bat(const std::vector<uint32_t>& entries);

  uint32_t size() const { return size_; }
  uint32_t entry(uint32_t block) const { return entries_[block].load(std::memory_order_acquire); }
  uint8_t flags(uint32_t block) const { return flags_[block].load(std::memory_order_acquire); }
  // Publishes flags, then the entry.
  void Publish(uint32_t block, uint32_t entry, uint8_t flags);
  void SetFlags(uint32_t block, uint8_t flags) {
    flags_[block].store(flags, std::memory_order_release);
  }
  // Number of entries != kUnallocated.
  uint32_t CountAllocated() const;
  std::vector<uint32_t> Snapshot() const;

  // The 512-byte BAT sector `sector` as stored on disk: entries big-endian, padding past the
  // last entry 0xFF.
  void SerializeSector(uint64_t sector, std::span<uint8_t, kSectorSize> out) const;

 private:
  uint32_t size_;
  std::unique_ptr<std::atomic<uint32_t>[]> entries_;
  std::unique_ptr<std::atomic<uint8_t>[]> flags_;
};

// The byte offset for the bitmap of a new block placed at or after `free_from`: the bitmap
// ends, and the data begins, on a kDataAlignment boundary. Gaps left in front are unused
// (other readers follow the BAT and do not care).
inline uint64_t PlaceBlock(uint64_t free_from, uint32_t bitmap_bytes) {
  const uint64_t data =
      (free_from + bitmap_bytes + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
  return data - bitmap_bytes;
}

// BAT sector `sector` of the table `entries` (a whole BAT, as loaded) as stored on disk:
// entries big-endian, padding past the last entry 0xFF. O(kEntriesPerBatSector): repairs and
// compaction write one sector per change without rebuilding the table.
void SerializeBatSector(std::span<const uint32_t> entries, uint64_t sector,
                        std::span<uint8_t, kSectorSize> out);

// Decodes BAT bytes (big-endian u32) into `out`.
void DecodeBat(std::span<const uint8_t> bytes, std::vector<uint32_t>* out);

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_BAT_H_
