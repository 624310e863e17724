// The dedup engine: every piece of state of the inline-deduplicating layer, without I/O, so it
// can be tested on its own. The device adapter (dedup_device.cc) hashes, reads and writes, and
// calls in here; every call is thread-safe (one mutex, held only for table updates).
//
// State:
//  - the map: one 32-bit entry per virtual grain: kUnmapped (never written or discarded),
//    kZero (written with zeros, stored as nothing) or kFirstGrain + physical grain number;
//  - the grain table: per physical grain its XXH3-128 fingerprint and reference count
//    (20 bytes);
//  - the fingerprint index: fingerprint -> physical grain, linear probing over 4-byte slots
//    plus a 1-byte tag per slot (the fingerprint itself stays in the grain table, which a probe
//    reads only when the tag matches); erased slots become tombstones; rehashed, and grown by
//    half when needed, at 80% use: 6.25 to 9.4 bytes per entry;
//  - a next-fit bitmap allocator of physical grains;
//  - transient state: per-virtual-grain write locks (a partial-grain write is a
//    read-modify-write and must not interleave with another write of the same grain), pins on
//    physical grains being read, grains whose data is being written.
//
// Copy-on-write: a write never overwrites a physical grain that is in use; it writes a free one
// and then remaps. A grain whose reference count drops to zero is not reused until a commit has
// made that release durable (and no reader has it pinned), so a crash never leaves the durable
// map pointing at overwritten data. Every persistent change goes to the MetaStore (if any) as
// absolute records grouped per grain operation.
#ifndef VSTACK_BLOCKDEV_DEDUP_DEDUP_ENGINE_H_
#define VSTACK_BLOCKDEV_DEDUP_DEDUP_ENGINE_H_

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "blockdev/dedup/fingerprint.h"
#include "blockdev/grainmap/grain_map.h"
#include "lib/block_device.h"

namespace vstack {

// The map, locks, pins, allocator, reclaimer and commits are GrainMap's (grain_map.h): its
// units are physical grains. What is dedup's own: the grain table, the index, refcounts and
// verify.
class DedupEngine : public GrainMap<DedupEngine, uint32_t> {
 public:
  // Map entry values.
  static constexpr uint32_t kUnmapped = 0;
  static constexpr uint32_t kZero = 1;
  static constexpr uint32_t kFirstGrain = 2;
  static constexpr uint64_t kMaxPhysicalGrains = 0xFFFFFFFFull - kFirstGrain;
  // Reference counts are 32-bit and a physical grain has at most one reference per virtual
  // grain, so capping the virtual grains below 2^32 - 1 means a count can never overflow
  // (16 TiB - 8 KiB with 4 KiB grains, 256 TiB with 64 KiB grains).
  static constexpr uint64_t kMaxVirtualGrains = 0xFFFFFFFFull - 1;

  // MetaStore tables.
  static constexpr uint32_t kMapTable = 0;    // 4-byte map entries, one per virtual grain
  static constexpr uint32_t kGrainTable = 1;  // 20-byte {fingerprint, refcount}, per physical grain
  static constexpr uint32_t kMapEntryBytes = 4;
  static constexpr uint32_t kGrainEntryBytes = 20;

  // `store` may be null (no persistence: tests, read-only blank devices).
  DedupEngine(uint64_t virtual_grains, uint64_t physical_grains, MetaStore* store);

  // ---- Loading. LoadEntry is the MetaStore::Load sink; FinishLoad then derives the reference
  // counts, the index and the allocator from the map (the stored reference counts are kept for
  // Check). Call before any other method.
  Status LoadEntry(uint32_t table, uint64_t index, const uint8_t* entry);
  void FinishLoad();

  // ---- Writes of whole grains.
  enum class Claim {
    kDone,     // the map is updated; the virtual grain is unlocked
    kBusy,     // the virtual grain is locked by another write, or an identical grain is being
               // written: nothing changed, retry later
    kVerify,   // verify=on found candidate `pgrain` (pinned): read it, compare, FinishVerify
    kWrite,    // write the data to free physical grain `pgrain`, then FinishWrite
    kNoSpace,  // no free physical grain; the virtual grain is unlocked. A commit may free some
               // (pending_frees() > 0)
  };
  struct ClaimResult {
    Claim what;
    uint32_t pgrain = 0;
  };
  // Claims virtual grain `v` for a write whose content is all zeros (`zero`) or has fingerprint
  // `fp`. `locked`: the caller already holds v's lock (LockForRmw). On kVerify and kWrite, v
  // stays locked until FinishVerify / FinishWrite.
  ClaimResult ClaimWrite(uint64_t v, bool zero, const Fingerprint& fp, bool verify, bool locked);
  // After kVerify: `equal` says whether the candidate's bytes match. Unpins the candidate.
  // Returns kDone (shared it), kWrite (a hash collision: write a new, unindexed grain) or
  // kNoSpace.
  ClaimResult FinishVerify(uint64_t v, uint32_t pgrain, const Fingerprint& fp, bool equal);
  // After kWrite: maps v to `pgrain` if `ok`, else frees it. Unlocks v.
  void FinishWrite(uint64_t v, uint32_t pgrain, const Fingerprint& fp, bool ok);

  // ---- Partial-grain writes (read-modify-write): LockForRmw, then ClaimWrite with `locked`,
  // or Unlock if the read failed (GrainMap).

  // ---- Write-zeroes and discard of whole grains: v becomes kZero, or kUnmapped if `unmap`.
  // Returns kDone, or kBusy if v is locked by another write.
  Claim SetZero(uint64_t v, bool unmap, bool locked);

  // ---- Reads (LookupForRead, Unpin, UnpinRange, MapEntries) and commits (TakeSnapshot,
  // FinishCommit, pending_bytes, pending_frees): GrainMap.

  // ---- Accounting.
  struct Usage {
    uint64_t live_grains = 0;       // map entries other than kUnmapped
    uint64_t zero_grains = 0;       // map entries kZero
    uint64_t unique_grains = 0;     // physical grains with a reference
    uint64_t allocated_grains = 0;  // physical grains not free (referenced, being written,
                                    // awaiting a commit or a reader)
    uint64_t index_entries = 0;
    uint64_t index_memory_bytes = 0;  // index slots + grain table + allocator bitmap
    uint64_t map_memory_bytes = 0;
    uint64_t collisions = 0;          // verify=on: fingerprint matches with different bytes
  };
  Usage usage() const;
  uint64_t physical_grains() const { return alloc_.units(); }

  // ---- Checking (no I/O). Verifies reference counts against the map (as loaded from disk and
  // as held in memory), the allocator and the index; adds findings to `out`. With a repair mode,
  // records corrected reference counts for the next commit and counts them as repaired.
  void Check(CheckMode mode, CheckResult* out);
  // Physical grains with a reference, with their fingerprints (for a content check), and one
  // virtual grain using each.
  struct UsedGrain {
    uint32_t pgrain;
    Fingerprint fp;
    uint64_t some_vgrain;
  };
  std::vector<UsedGrain> UsedGrains() const;

 private:
  friend class GrainMap<DedupEngine, uint32_t>;
  static bool HasUnit(uint32_t e) { return e >= kFirstGrain; }
  static uint64_t UnitOf(uint32_t e) { return e - kFirstGrain; }
  void FreeUnit(uint64_t p) { FreeGrain(static_cast<uint32_t>(p)); }

  struct GrainRec {
    uint32_t fp[4];
    uint32_t ref;
  };
  static Fingerprint FpOf(const GrainRec& r);
  static void SetFp(GrainRec& r, const Fingerprint& fp);

  // All REQUIRE mu_.
  void SetMap(uint64_t v, uint32_t entry);
  void RecordGrain(uint32_t p);
  void AddRef(uint32_t p);
  void Release(uint32_t old_entry);
  void FreeGrain(uint32_t p);
  ClaimResult AllocateAndWrite(uint64_t v, const Fingerprint& fp, bool indexed);
  uint64_t SlotOf(const Fingerprint& fp) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(fp.lo) * slots_.size()) >> 64);
  }
  // Index tags: 0 is an empty slot, kTombstone an erased one, 1..254 a fingerprint's tag.
  static constexpr uint8_t kTombstone = 255;
  static uint8_t TagOf(const Fingerprint& fp) { return static_cast<uint8_t>(1 + fp.hi % 254); }
  std::optional<uint32_t> IndexFind(const Fingerprint& fp) const;
  void IndexInsert(const Fingerprint& fp, uint32_t p);
  void IndexErase(uint32_t p);
  void IndexRehash(size_t slots);

  ChunkedArray<GrainRec> grains_;
  std::vector<uint8_t> tags_;    // index: 0 = empty slot, else TagOf(fingerprint)
  std::vector<uint32_t> slots_;  // index: the physical grain of each used slot
  uint64_t index_entries_ = 0;
  uint64_t index_tombstones_ = 0;
  FlatMap<bool> writing_;                               // physical grain -> indexed
  std::unordered_map<uint32_t, uint32_t> stored_refs_;  // loaded refcount where it differs
  uint64_t live_ = 0, zeros_ = 0, unique_ = 0, collisions_ = 0;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_DEDUP_DEDUP_ENGINE_H_
