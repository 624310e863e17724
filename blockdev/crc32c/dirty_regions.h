// DirtyRegions: which parts of a crc32c device may hold data that its stored checksums do not
// describe, in the way of dm-integrity's bitmap mode.
//
// Data stays in place, so a data write and its checksum cannot reach the disk together. The
// device is cut into regions (the grains of one checksum table page), and a region is durably
// marked dirty before its first write; after a crash every dirty region's checksums are
// recomputed from the data. A region is cleaned at a flush once no write has touched it for a
// whole flush interval: its checksum page is written and made durable, then its dirty flag is
// cleared.
//
// The state of a region is one atomic word (writes in flight, durably dirty), so writers on
// every queue's thread touch regions without a lock: a writer that finds its region not
// durably dirty marks it (crc32c_device.cc, under the metadata lock) before its data goes down;
// the cleaner takes a region out of the dirty ones only when no write is in flight on it, in one
// compare-and-swap, so a write that starts later marks it again.
#ifndef VSTACK_BLOCKDEV_CRC32C_DIRTY_REGIONS_H_
#define VSTACK_BLOCKDEV_CRC32C_DIRTY_REGIONS_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "blockdev/metastore/atomic_array.h"

namespace vstack {

class DirtyRegions {
 public:
  explicit DirtyRegions(uint64_t regions) : state_(regions), last_epoch_(regions) {}

  uint64_t size() const { return state_.size(); }
  bool dirty(uint64_t r) const { return state_.Load(r) & kDirty; }
  uint64_t dirty_count() const;

  // Loading: region r is dirty on disk.
  void LoadDirty(uint64_t r) { state_.Store(r, kDirty); }
  // A write of regions [r0, r1] starts: appends those not durably dirty to `to_mark` (the caller
  // marks them on disk, then calls Marked).
  void Touch(uint64_t r0, uint64_t r1, std::vector<uint64_t>* to_mark);
  void Untouch(uint64_t r0, uint64_t r1);
  // The regions are durably dirty now (or, after a failed clean, still are).
  void Marked(const std::vector<uint64_t>& regions);

  // At a flush: starts a new flush interval and takes out of the dirty ones the regions with no
  // write in flight and none in the interval that ends (`all`: every region with no write in
  // flight). Returns them, in order: the caller writes their checksums, flushes, and clears
  // their flags on disk.
  std::vector<uint64_t> PickClean(bool all);

 private:
  static constexpr uint64_t kDirty = 1;
  static constexpr uint64_t kOneWrite = 2;

  AtomicArray<uint64_t> state_;       // writes in flight * kOneWrite | kDirty
  AtomicArray<uint64_t> last_epoch_;  // flush interval of the last write
  std::atomic<uint64_t> epoch_{1};
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_CRC32C_DIRTY_REGIONS_H_
