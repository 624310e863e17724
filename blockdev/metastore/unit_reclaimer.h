// Copy-on-write reuse of physical units (dedup's grains, zstd's bins). A unit whose last
// reference goes away must not be overwritten while durable metadata may still point at it, nor
// while a reader that looked it up is still reading it. UnitReclaimer tracks:
//   - released units, with the epoch of their release: a commit snapshot of epoch E covers every
//     release recorded before it, so once that commit is durable those units may be freed;
//   - pins held by readers (counted); a unit due to be freed while pinned is deferred until its
//     last pin goes.
// It only keeps the books: the caller frees the units it is told to (allocator, index).
// Not thread-safe: the caller holds its own mutex.
#ifndef VSTACK_BLOCKDEV_METASTORE_UNIT_RECLAIMER_H_
#define VSTACK_BLOCKDEV_METASTORE_UNIT_RECLAIMER_H_

#include <cstdint>
#include <vector>

#include "blockdev/metastore/flat_map.h"

namespace vstack {

class UnitReclaimer {
 public:
  void Pin(uint64_t unit) { ++pins_[unit]; }
  // Drops one pin; true if `unit` must be freed now (it was deferred).
  bool Unpin(uint64_t unit);
  bool pinned(uint64_t unit) const { return pins_.Contains(unit); }

  // `unit` lost its last reference in the current epoch.
  void Released(uint64_t unit) { released_[unit] = epoch_; }
  // `unit` is referenced again before it was freed.
  void Revived(uint64_t unit) {
    released_.Erase(unit);
    deferred_.Erase(unit);
  }
  // True while released but not yet freed.
  bool pending(uint64_t unit) const { return released_.Contains(unit) || deferred_.Contains(unit); }
  uint64_t pending_count() const { return released_.size() + deferred_.size(); }

  // Starts a new epoch at a commit snapshot; returns the epoch the snapshot covers.
  uint64_t Snapshot() { return epoch_++; }
  // The commit of snapshot `epoch` is durable: appends the units that may be freed now to
  // `out`; pinned ones are deferred until unpinned.
  void Committed(uint64_t epoch, std::vector<uint64_t>* out);

 private:
  uint64_t epoch_ = 1;
  FlatMap<uint32_t> pins_;
  FlatMap<uint64_t> released_;  // unit -> epoch of its release
  FlatSet deferred_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_UNIT_RECLAIMER_H_
