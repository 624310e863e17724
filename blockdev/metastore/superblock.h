// The superblock of a transform layer's metadata (dedup, zstd, crc32c): two 4 KiB slots at
// offsets 0 and 4096 of the device below, written alternately (slot = generation % 2) with FUA,
// so that a torn superblock write leaves the previous generation intact. The valid slot with the
// higher generation wins.
//
// It holds what every layer needs to find its metadata (the journal region, the tables, where
// data starts, the journal sequence that replay starts from, a random volume id that seeds every
// metadata checksum so stale metadata of an earlier format never validates) plus the layer's
// own fields as an opaque payload (grain size, virtual size, options), encoded with ByteWriter.
// The byte layout is in docs/layers/dedup.md, "On-disk format".
#ifndef VSTACK_BLOCKDEV_METASTORE_SUPERBLOCK_H_
#define VSTACK_BLOCKDEV_METASTORE_SUPERBLOCK_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/errors.h"
#include "lib/sync_io.h"

namespace vstack {

inline constexpr uint64_t kMetaPageSize = 4096;
inline constexpr uint64_t kSuperblockBytes = 2 * kMetaPageSize;  // slots A and B
inline constexpr size_t kMaxTables = 8;
inline constexpr size_t kMaxPayload = 2048;

// One table of fixed-size entries, stored in 4 KiB pages (see table_page.h).
struct TableDesc {
  uint64_t offset = 0;   // byte offset of page 0 on the device below
  uint64_t entries = 0;  // number of entries
  uint32_t entry_size = 0;

  uint32_t per_page() const;
  uint64_t pages() const;
  uint64_t bytes() const { return pages() * kMetaPageSize; }
};

struct Superblock {
  std::string magic;  // exactly 8 characters, e.g. "VSDEDUP1"
  uint64_t generation = 0;
  uint64_t volume_id = 0;
  uint64_t checkpoint_seq = 1;  // journal replay starts with this transaction sequence number
  uint64_t journal_offset = 0;
  uint64_t journal_bytes = 0;
  uint64_t data_offset = 0;  // first byte after all metadata
  std::vector<TableDesc> tables;
  std::vector<uint8_t> payload;  // the layer's own fields
  // Not stored: set by ReadSuperblock when the other slot holds something that does not decode
  // (torn by a crash during its write, or damaged): its error (MetaStore adds what its journal
  // showed when that slot was the newer one). The next superblock write goes to that slot and
  // rewrites it.
  std::string other_slot_problem;
};

// The 4 KiB image of `sb` (checksum included).
std::vector<uint8_t> EncodeSuperblock(const Superblock& sb);
// Parses one slot read from `offset`. Errors name the slot's offset and the bad field.
Result<Superblock> DecodeSuperblock(const uint8_t* slot, std::string_view magic, uint64_t offset,
                                    const std::string& who);
// Checks that the journal, the tables and the data area lie inside a device of `device_size`
// bytes, in order and without overlap.
Status ValidateLayout(const Superblock& sb, uint64_t device_size, const std::string& who);

// Reads both slots through `io` and returns the newer valid one. Returns Errc::kNotFound when
// both slots are blank (all zeros: never formatted), or when slot B is blank and slot A invalid
// with nothing past its first 1 KiB and a first 512-byte sector that is blank or starts with
// `magic` (the first write of a format, torn by a crash); an error naming each slot's problem
// when neither is valid but something else is written there (a partition table in the first
// sector, say). A device that ends after slot A (a truncated image) reads as if slot B were
// blank, so that a valid slot A is still found: the caller then compares what it says with the
// device's size.
Result<Superblock> ReadSuperblock(SyncIo& io, std::string_view magic, const std::string& who);
// True if both slots read as zeros (as far as the device holds them): a device never formatted,
// not one whose first write of a format was torn. False if they cannot be read.
bool SuperblockSlotsBlank(SyncIo& io);

// True if either superblock slot starts with `magic`: the device holds a superblock of this
// kind, valid or damaged; false for a device that holds other data (or nothing), or that cannot
// be read.
bool HoldsSuperblockMagic(SyncIo& io, std::string_view magic);
// The magic of a valid superblock (of any layer that keeps its metadata in a MetaStore: its
// magic starts with "VS") in either slot, or "" if there is none.
std::string ValidSuperblockMagic(SyncIo& io);
// Writes `sb` to slot sb.generation % 2 with FUA.
Status WriteSuperblock(SyncIo& io, const Superblock& sb, const std::string& who);
// Writes *sb again as its next generation, so to the other slot (which rewrites a slot that did
// not decode: other_slot_problem is cleared). *sb becomes what was written; on failure it is
// unchanged.
Status WriteNextGeneration(SyncIo& io, Superblock* sb, const std::string& who);
// Formats the metadata of a new `sb` (a planned one, generation 1) through `io`: zeroes the area
// [journal_offset, data_offset) (allocated, not unmapped), flushes, then writes both slots, a
// copy with generation 0 to slot 0 and then `sb`.
Status FormatMetadata(SyncIo& io, const Superblock& sb, const std::string& who);

// Little-endian field encoding for superblock payloads.
class ByteWriter {
 public:
  void U8(uint8_t v) { bytes_.push_back(v); }
  void U32(uint32_t v);
  void U64(uint64_t v);
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads fields back; reading past the end sets !ok() and yields zeros.
class ByteReader {
 public:
  explicit ByteReader(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  uint8_t U8();
  uint32_t U32();
  uint64_t U64();
  int32_t I32() { return static_cast<int32_t>(U32()); }
  bool ok() const { return ok_; }

 private:
  bool Need(size_t n);
  const std::vector<uint8_t>& bytes_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_SUPERBLOCK_H_
