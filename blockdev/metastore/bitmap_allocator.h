// An allocator of numbered units (dedup's physical grains, zstd's bins) over bitmaps, 3 bits per
// unit (used, stale, and a scratch mark for linear-time passes over lists of units), plus the
// lists of stale units. A free unit is either clean (never written, or discarded on the device below) or stale:
// freed, but its old bytes still take space on the device below (a thin device: zstd, a dynamic
// VHD, a sparse file). Allocation reuses stale units first, most recently freed first: reusing
// one needs no discard (it is about to be rewritten) and keeps what the layer occupies below
// small. Only when none is stale does it search the clean ones, next fit from where the
// previous search ended, so sequential writes land on consecutive units.
//
// Discarding stale units (the layer's part): TakeAged or TakeStale hand units out for a discard
// below and mark them used, so no allocation can return them while their discard is on its way;
// FreeDiscarded gives them back clean. Not thread-safe: callers hold their own lock.
#ifndef VSTACK_BLOCKDEV_METASTORE_BITMAP_ALLOCATOR_H_
#define VSTACK_BLOCKDEV_METASTORE_BITMAP_ALLOCATOR_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "blockdev/metastore/zeroed_array.h"

namespace vstack {

class BitmapAllocator {
 public:
  explicit BitmapAllocator(uint64_t units = 0);

  // Allocates one free unit (a stale one if any), or nullopt when every unit is in use.
  std::optional<uint64_t> Allocate();
  // Allocates up to `max` consecutive units, at least `want` if free space allows, and
  // returns the first and sets *count (>= 1), or nullopt when every unit is in use: the free
  // run around the most recently freed stale unit whose run holds `want` (of the 8 most
  // recent; the others stay first in line), else the next clean run that does (next fit),
  // else the stale run after all.
  std::optional<uint64_t> AllocateRun(uint64_t want, uint64_t max, uint64_t* count);
  std::optional<uint64_t> AllocateRun(uint64_t max, uint64_t* count) {
    return AllocateRun(1, max, count);
  }
  // Marks `unit` used (loading). REQUIRES: unit < units(), free.
  void MarkUsed(uint64_t unit);
  // Frees a used unit; it is stale (its bytes below are whatever was last written there).
  void Free(uint64_t unit);
  bool IsUsed(uint64_t unit) const { return Bit(used_words_, unit); }
  bool IsStale(uint64_t unit) const { return Bit(stale_words_, unit); }

  // ---- Discarding stale units. A round is the time between two TakeAged calls (a layer's
  // commits). TakeAged appends to `out` the units that have stayed stale for a whole round
  // (freed in an earlier round and not reused since) and marks them used, unless at most `keep`
  // units are stale: then they stay candidates for the next call. Only aged units in runs of at
  // least `min_run` consecutive units are taken; the others stay stale, for reuse or for
  // TakeStale (a discard of a lone unit costs the device below about what the unit is worth).
  // With `out` null (nothing is discarded below) it only starts a new round. TakeStale takes
  // every stale unit. Both append in increasing order.
  void TakeAged(std::vector<uint64_t>* out, uint64_t keep = 0, uint64_t min_run = 1);
  void TakeStale(std::vector<uint64_t>* out);
  // Frees units that TakeAged/TakeStale handed out, clean (their discard is done or failed).
  void FreeDiscarded(const std::vector<uint64_t>& units);

  uint64_t units() const { return units_; }
  uint64_t used() const { return used_; }
  uint64_t free() const { return units_ - used_; }
  uint64_t stale() const { return stale_; }
  // Bytes of memory the allocator takes: the bitmaps' pages written so far (their reservation
  // is larger) and the lists of stale units.
  uint64_t memory_bytes() const;

 private:
  static bool Bit(const ZeroedArray<uint64_t>& w, uint64_t u) {
    return (w[u / 64] >> (u % 64)) & 1;
  }
  static void Set(ZeroedArray<uint64_t>& w, uint64_t u) { w[u / 64] |= uint64_t{1} << (u % 64); }
  static void Clear(ZeroedArray<uint64_t>& w, uint64_t u) {
    w[u / 64] &= ~(uint64_t{1} << (u % 64));
  }
  std::optional<uint64_t> FindFree() const;
  // The first free run of at least `want` units from the cursor on (a bounded search).
  std::optional<uint64_t> FindFreeRun(uint64_t want) const;
  // Marks up to `max` free units from `first` on used; returns how many.
  uint64_t TakeRun(uint64_t first, uint64_t max);
  std::optional<uint64_t> PopStale();
  // Takes the stale units among `candidates` (in any order, duplicates allowed) that lie in
  // runs of at least `min_run` consecutive candidates into `out`.
  void Take(const std::vector<uint64_t>& candidates, std::vector<uint64_t>* out,
            uint64_t min_run = 1);
  void ClearStale(uint64_t unit);
  // Drops the entries of reuse_ whose unit is no longer stale, and repeats.
  void CompactReuse();

  uint64_t units_;
  uint64_t used_ = 0;
  uint64_t cursor_ = 0;  // where the next search for a clean unit starts
  // Reserved, not taken (ZeroedArray): the words of units never used take no memory, so the
  // bitmaps of a large, mostly empty device below cost what was written.
  ZeroedArray<uint64_t> used_words_;
  ZeroedArray<uint64_t> stale_words_;
  ZeroedArray<uint64_t> mark_words_;  // Take's and CompactReuse's scratch: zero between calls
  uint64_t stale_ = 0;
  // Every stale unit is in `reuse_` (a stack: the most recently freed on top). Entries whose
  // unit is no longer stale, and duplicates, are skipped when popped and dropped by Compact.
  std::vector<uint64_t> reuse_;
  std::vector<uint64_t> freed_this_round_, freed_last_round_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_BITMAP_ALLOCATOR_H_
