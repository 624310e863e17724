// GrainMap: the state every mapping engine (dedup's, zstd's) has, and the methods that use
// only it. A map entry per virtual grain (of type Entry) either names a stored unit (a
// physical grain, a bin) or not (unmapped, zero); units come from an allocator that reuses
// freed units first (bitmap_allocator.h) and go back to it through copy-on-write reuse
// (unit_reclaimer.h); a write holds its virtual grain's lock; every persistent change goes to
// the MetaStore (if any).
//
// The engine derives from GrainMap<Engine, Entry> (CRTP, so nothing here is a virtual call)
// and supplies:
//   static bool HasUnit(Entry e);       // e names a stored unit
//   static uint64_t UnitOf(Entry e);    // which one (REQUIRES: HasUnit(e))
//   void FreeUnit(uint64_t unit);       // gives a unit back (allocator, index); under mu_
// Thread-safe: one mutex, mu_, which the engine's own methods take too.
#ifndef VSTACK_BLOCKDEV_GRAINMAP_GRAIN_MAP_H_
#define VSTACK_BLOCKDEV_GRAINMAP_GRAIN_MAP_H_

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "blockdev/metastore/bitmap_allocator.h"
#include "blockdev/metastore/chunked_array.h"
#include "blockdev/metastore/flat_map.h"
#include "blockdev/metastore/meta_store.h"
#include "blockdev/metastore/unit_reclaimer.h"

namespace vstack {

template <class Engine, class Entry>
class GrainMap {
 public:
  // ---- Write locks. A write of a grain holds its lock from before it reads or computes
  // until its remap (or Unlock).
  bool Lock(uint64_t v) {
    std::lock_guard lock(mu_);
    return locked_.Insert(v);
  }
  // Locks v and returns its entry, pinning its unit if it has one (for read-modify-write;
  // Unpin it after reading). False if another write holds v.
  bool LockForRmw(uint64_t v, Entry* entry) {
    std::lock_guard lock(mu_);
    if (!locked_.Insert(v)) return false;
    *entry = map_.Get(v);
    if (Engine::HasUnit(*entry)) reclaim_.Pin(Engine::UnitOf(*entry));
    return true;
  }
  // Gives up a lock without a change.
  void Unlock(uint64_t v) {
    std::lock_guard lock(mu_);
    locked_.Erase(v);
  }

  // ---- Reads. Appends the map entries of virtual grains [first, first+count) to `out`,
  // pinning each unit (unpin it once read).
  void LookupForRead(uint64_t first, uint64_t count, std::vector<Entry>* out) {
    std::lock_guard lock(mu_);
    for (uint64_t v = first; v < first + count; ++v) {
      const Entry e = map_.Get(v);
      if (Engine::HasUnit(e)) reclaim_.Pin(Engine::UnitOf(e));
      out->push_back(e);
    }
  }
  // Pins are counted; a unit is reused only once unpinned.
  void Unpin(uint64_t unit) {
    std::lock_guard lock(mu_);
    UnpinLocked(unit);
  }
  // Unpins units [first, first+count).
  void UnpinRange(uint64_t first, uint64_t count) {
    std::lock_guard lock(mu_);
    for (uint64_t i = 0; i < count; ++i) UnpinLocked(first + i);
  }
  // Map entries of [first, first+count) without pinning (MapExtents).
  void MapEntries(uint64_t first, uint64_t count, std::vector<Entry>* out) const {
    std::lock_guard lock(mu_);
    for (uint64_t i = 0; i < count; ++i) out->push_back(map_.Get(first + i));
  }

  // ---- Commits (see meta_store.h). TakeSnapshot takes the records of every finished
  // operation; after the commit, FinishCommit frees the units whose release it made durable
  // (or, if !ok, puts the records back for the next commit). Freed units are stale (their old
  // bytes are still below) and are what the allocator reuses first (bitmap_allocator.h).
  // With `discard`, FinishCommit also hands out the units that stayed free and unused since the
  // previous commit, if more than `keep` are stale: they stay unusable until FinishDiscard, so
  // no write can reuse a unit while its discard below is on its way.
  struct Snapshot {
    MetaBatch batch;
    uint64_t epoch = 0;
  };
  Snapshot TakeSnapshot() {
    std::lock_guard lock(mu_);
    Snapshot s;
    if (store_) s.batch = store_->TakePending();
    s.epoch = reclaim_.Snapshot();
    return s;
  }
  void FinishCommit(Snapshot snapshot, bool ok, std::vector<uint64_t>* discard = nullptr,
                    uint64_t keep = 0, uint64_t min_run = 1) {
    std::lock_guard lock(mu_);
    if (!ok) {
      if (store_) store_->RestorePending(std::move(snapshot.batch));
      return;
    }
    std::vector<uint64_t> freed;
    reclaim_.Committed(snapshot.epoch, &freed);
    for (uint64_t u : freed) self().FreeUnit(u);
    alloc_.TakeAged(discard, keep, min_run);
  }
  // Hands out every stale unit for a discard (at close, or to make room below).
  void TakeStale(std::vector<uint64_t>* discard) {
    std::lock_guard lock(mu_);
    alloc_.TakeStale(discard);
  }
  // Frees the units FinishCommit or TakeStale handed out, once their discard has completed.
  void FinishDiscard(const std::vector<uint64_t>& units) {
    std::lock_guard lock(mu_);
    alloc_.FreeDiscarded(units);
  }
  // Bytes of metadata records waiting for a commit.
  size_t pending_bytes() const {
    std::lock_guard lock(mu_);
    return store_ ? store_->pending_bytes() : 0;
  }
  // Units released but not yet free (a commit may free them).
  uint64_t pending_frees() const {
    std::lock_guard lock(mu_);
    return reclaim_.pending_count();
  }

  uint64_t virtual_grains() const { return map_.size(); }

 protected:
  // `store` may be null (no persistence: tests, read-only blank devices).
  GrainMap(uint64_t virtual_grains, uint64_t units, MetaStore* store)
      : store_(store), map_(virtual_grains), alloc_(units) {}

  // REQUIRES mu_.
  void UnpinLocked(uint64_t unit) {
    if (reclaim_.Unpin(unit)) self().FreeUnit(unit);
  }
  // Calls fn(v, entry) for every entry of every allocated chunk of the map, in order. REQUIRES mu_.
  template <class Fn>
  void ForEachEntry(Fn fn) const {
    constexpr uint64_t kChunk = ChunkedArray<Entry>::kChunk;
    for (uint64_t c = 0; c < map_.chunks(); ++c) {
      const Entry* chunk = map_.ChunkData(c);
      if (chunk == nullptr) continue;
      const uint64_t first = c * kChunk;
      const uint64_t n = std::min<uint64_t>(kChunk, map_.size() - first);
      for (uint64_t i = 0; i < n; ++i) fn(first + i, chunk[i]);
    }
  }

  MetaStore* const store_;
  mutable std::mutex mu_;
  ChunkedArray<Entry> map_;
  BitmapAllocator alloc_;
  UnitReclaimer reclaim_;
  FlatSet locked_;  // virtual grains being written

 private:
  Engine& self() { return static_cast<Engine&>(*this); }
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_GRAINMAP_GRAIN_MAP_H_
