// DedupIndex: which stored unit holds the grain with a given fingerprint, shared by every
// queue's thread. The fingerprints themselves are kept per unit (16 bytes each, sized at
// open); the index is 64 shards, each a hash table of its own behind its own mutex (a
// fingerprint's shard is its top bits), so two threads meet on a lock only when their
// fingerprints share a shard.
//
// A shard is linear probing over 5-byte slots, each a unit number and a 1-byte tag (0 empty,
// kTombstone erased, else 1..254 from the fingerprint), side by side so that a probe costs
// one cache miss and reads a unit's fingerprint only when the tag matches. Rehashed (and grown
// by half when the entries alone fill 60%) at 80% use: 6.25 to 12.5 bytes per entry.
//
// An entry is pending from Insert until Ready: its unit is being written by one write (its
// owner), so another write of the same grain waits for it (Find says who owns it) instead of
// storing it again or sharing a unit whose bytes are not below yet. The owner is kept per unit
// (8 bytes each, reserved like the fingerprints), beside the unit's other state rather than in
// the shard, so Ready is one atomic store: no shard lock, no shared table to update.
#ifndef VSTACK_BLOCKDEV_DEDUP_DEDUP_INDEX_H_
#define VSTACK_BLOCKDEV_DEDUP_DEDUP_INDEX_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "blockdev/dedup/fingerprint.h"
#include "blockdev/metastore/atomic_array.h"

namespace vstack {

class DedupIndex {
 public:
  static constexpr int kShardBits = 6;

  // For `units` stored units, at most `max_entries` of them indexed at once (a device holds no
  // more unique grains than it has virtual grains): the shards are sized up front for an eighth
  // of the fewer, so a small device over a large one below takes little memory.
  DedupIndex(uint64_t units, uint64_t max_entries);

  // The fingerprint kept for `unit` (its record in the unit table).
  Fingerprint Of(uint64_t unit) const { return {fps_.Load(2 * unit), fps_.Load(2 * unit + 1)}; }
  void Set(uint64_t unit, const Fingerprint& fp) {
    fps_.Store(2 * unit, fp.lo);
    fps_.Store(2 * unit + 1, fp.hi);
  }

  static size_t ShardOf(const Fingerprint& fp) { return fp.hi >> (64 - kShardBits); }
  // The lock of the shard `fp` belongs to: every call below holds it.
  std::unique_lock<std::mutex> Lock(const Fingerprint& fp) {
    return std::unique_lock(shards_[ShardOf(fp)].mu);
  }

  struct Hit {
    uint64_t unit = 0;
    uint64_t owner = 0;  // 0: ready; else the write that is storing it
  };
  std::optional<Hit> Find(const Fingerprint& fp) const;
  // Adds fp -> unit, pending for `owner` (not 0). REQUIRES: fp is not in the index; Set(unit).
  void Insert(const Fingerprint& fp, uint64_t unit, uint64_t owner);
  // The pending entry of `unit` is ready (its bytes are below and mapped). Needs no lock: only
  // the owner calls it, while its grain is locked and the unit mapped, so nothing erases or
  // reuses the unit meanwhile; a Find under the shard lock sees the owner or 0, and either is
  // right (a write that saw the owner waits and looks again).
  void Ready(uint64_t unit) { owners_.Store(unit, 0); }
  // Removes `unit`'s entry, if indexed (a duplicate kept after a collision is not).
  void Erase(uint64_t unit);

  uint64_t entries() const;
  // Bytes of memory the index takes: the pages of its per-unit arrays written so far (reserved
  // for every unit; WrittenPageBytes) and its shards' slots.
  uint64_t memory_bytes() const;

 private:
  static constexpr uint8_t kTombstone = 255;
  struct __attribute__((packed)) Slot {
    uint32_t unit;
    uint8_t tag;
  };
  // A cache line or more of its own: a thread locking one shard does not take the line of
  // the shard beside it from the thread working there.
  struct alignas(64) Shard {
    mutable std::mutex mu;
    std::vector<Slot> slots;
    uint64_t entries = 0, tombstones = 0;
  };
  static uint8_t TagOf(const Fingerprint& fp) { return static_cast<uint8_t>(1 + fp.hi % 254); }

  static uint64_t SlotOf(const Shard& s, const Fingerprint& fp) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(fp.lo) * s.slots.size()) >> 64);
  }
  void Rehash(Shard& s, size_t slots);

  AtomicArray<uint64_t> fps_;     // per unit: lo, hi
  AtomicArray<uint64_t> owners_;  // per unit: the write storing it while pending, else 0
  std::vector<Shard> shards_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_DEDUP_DEDUP_INDEX_H_
