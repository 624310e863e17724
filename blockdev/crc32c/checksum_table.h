// The state of the crc32c layer, without I/O: one CRC-32C per grain, the grains being written
// (their new checksums are accepted by readers from the moment the write is issued), write locks
// for read-modify-writes, and the dirty regions.
//
// Data stays in place, so a data write and its checksum cannot reach the disk atomically. As in
// dm-integrity's bitmap mode, the device is cut into regions (the grains of one checksum table
// page) and a region is durably marked dirty before its first write; after a crash every dirty
// region's checksums are recomputed from the data. A region is cleaned at a flush once no write
// has touched it for a whole flush interval: its table page is written and made durable, then
// its dirty bit is cleared.
//
// Stored checksums are XORed with the checksum of an all-zero grain, so a table page of zeros
// (never written) describes zero grains. Thread-safe: one mutex, held only for table updates.
#ifndef VSTACK_BLOCKDEV_CRC32C_CHECKSUM_TABLE_H_
#define VSTACK_BLOCKDEV_CRC32C_CHECKSUM_TABLE_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "blockdev/metastore/chunked_array.h"
#include "blockdev/metastore/flat_map.h"

namespace vstack {

class ChecksumTable {
 public:
  // `grains_per_region`: the checksums in one table page.
  ChecksumTable(uint64_t grains, uint32_t grain, uint32_t grains_per_region);

  uint64_t grains() const { return crc_.size(); }
  uint64_t regions() const { return regions_.size(); }
  uint32_t grains_per_region() const { return per_region_; }
  uint32_t zero_crc() const { return zero_crc_; }
  // The stored form of a checksum (XOR the zero grain's), and back.
  uint32_t Stored(uint32_t crc) const { return crc ^ zero_crc_; }

  // ---- Loading (before any I/O).
  void LoadStored(uint64_t g, uint32_t stored) { crc_.At(g) = stored; }
  void LoadDirty(uint64_t region) { regions_[region].durable_dirty = true; }

  // ---- Reads. True if `crc` is the checksum of grain g, or of a write of g in flight.
  bool Matches(uint64_t g, uint32_t crc) const;

  // ---- Writes. A write request first touches its regions (TouchRegions, which says which of
  // them must be marked dirty on disk before any data goes down), then per grain: Lock (write
  // locks for read-modify-writes and the grains around them), AddPending just before the data
  // write is issued, and Finish when it completes. UntouchRegions when the request is done.
  void TouchRegions(uint64_t first_grain, uint64_t last_grain, std::vector<uint64_t>* to_mark);
  void UntouchRegions(uint64_t first_grain, uint64_t last_grain);
  // After the dirty bits of `regions` are durable.
  void Marked(const std::vector<uint64_t>& regions);
  bool Lock(uint64_t g);
  void Unlock(uint64_t g);
  void AddPending(uint64_t g, uint32_t crc);
  // The write of g with checksum `crc` completed (ok) or failed: a failed write leaves the
  // grain's content unknown, so its checksum is left as it was and reads will tell.
  void Finish(uint64_t g, uint32_t crc, bool ok);

  // True if region r is not durably marked dirty (a write to it must mark it first).
  bool NeedsMark(uint64_t r) const;

  // ---- Cleaning, at a flush. Starts a new flush interval and picks the regions to clean:
  // dirty on disk, no write in flight, none since the previous flush (`all`: every dirty region
  // without a write in flight). They count as clean in
  // memory from now on (a new write marks them again). Returns their table page images
  // (entries only, stored form).
  struct Clean {
    uint64_t region;
    std::vector<uint32_t> stored;
  };
  std::vector<Clean> PickClean(bool all);

  // ---- Accounting: grains whose checksum is the zero grain's (almost surely all zeros).
  uint64_t zero_grains() const;
  // Dirty regions (on disk) right now.
  uint64_t dirty_regions() const;
  // Checksum of grain g as stored (for a scrub).
  uint32_t crc(uint64_t g) const;
  // Sets a recomputed checksum (recovery, repair).
  void Set(uint64_t g, uint32_t crc);

 private:
  struct Region {
    uint32_t in_flight = 0;   // write requests touching it
    uint64_t last_epoch = 0;  // flush interval of its last write
    bool durable_dirty = false;
  };

  const uint32_t per_region_;
  const uint32_t zero_crc_;
  mutable std::mutex mu_;
  ChunkedArray<uint32_t> crc_;  // stored form
  std::vector<Region> regions_;
  FlatMap<uint32_t> pending_;  // grain -> checksum being written (writes hold the grain's lock)
  FlatSet locked_;
  uint64_t epoch_ = 1;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_CRC32C_CHECKSUM_TABLE_H_
