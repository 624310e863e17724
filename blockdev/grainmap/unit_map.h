// UnitMap: the shared state of a grain layer (grain_device.h), built so that the threads of all
// its queues work on it at once with no lock in common on the data path:
//
//  - the map: one entry per virtual grain, 4 or 8 bytes (the layer's choice): kUnmapped, kZero,
//    or a stored grain, whose low 32 bits name its unit (+2) and whose high bits are the
//    layer's (zstd: a fragment's offset and length in its bin);
//  - grain locks, one bit per virtual grain: a write holds the bits of its grains from before it
//    reads or encodes them until it has remapped them;
//  - per unit: its reference count (the map entries that name it, plus holds: a bin that a
//    zstd queue still fills) and the epoch of its release;
//  - the allocator (bitmap_allocator.h, behind a mutex): a queue takes a run of free units at
//    a time (its reserve) and allocates from it alone, so the grains of one write land on
//    consecutive units and the mutex is taken about once per 64 units;
//  - a journal per queue: the grains it remapped, the units it stored new content in and the
//    units it released since the last commit, and its share of the usage counters, under its own
//    mutex, which only a commit takes as well.
// Every table is sized at open (AtomicArray): nothing on the data path allocates.
//
// Copy-on-write reuse. A unit whose last reference goes is released in the current epoch. A
// commit takes a consistent cut (Capture: every journal's mutex held at once, the epoch
// advanced, the entries of the remapped grains read), journals it, and then frees (Reclaim) the
// units released before the cut that nothing referenced or pinned since. Every change of an
// entry, a reference or a release is made holding the changing queue's journal mutex, so a cut
// sees each operation whole or not at all.
//
// Readers hold back reuse without touching the units they read: an operation that looks
// entries up (a read; a write comparing with a stored unit) enters the current read
// generation (its queue's own counter) before and leaves it after. Reclaim advances the
// generation once nobody is left in the one before, and frees a released unit only when every
// reader that entered before its release could have left: else it waits for the next commit.
// A reader costs two atomic operations on its queue's own cache line, not one per unit.
//
// In-place layers (crc32c) have no units: a grain stays at its own position and its entry is
// what the layer keeps for it (a checksum); they use the map and the locks only.
#ifndef VSTACK_BLOCKDEV_GRAINMAP_UNIT_MAP_H_
#define VSTACK_BLOCKDEV_GRAINMAP_UNIT_MAP_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "blockdev/metastore/atomic_array.h"
#include "blockdev/metastore/bitmap_allocator.h"
#include "blockdev/metastore/flat_map.h"
#include "lib/block_device.h"

namespace vstack {

class UnitMap {
 public:
  struct Journal;
  static constexpr uint64_t kUnmapped = 0;  // never written, or discarded
  static constexpr uint64_t kZero = 1;      // written with zeros, stored as nothing
  static bool HasUnit(uint64_t e) { return e > kZero; }
  static uint64_t UnitOf(uint64_t e) { return (e & 0xFFFFFFFF) - 2; }
  static uint64_t EntryOf(uint64_t unit) { return unit + 2; }

  // `entry_bytes`: 4 or 8; `units`: 0 for an in-place layer.
  UnitMap(uint64_t grains, uint32_t entry_bytes, uint64_t units);
  ~UnitMap();

  uint64_t grains() const { return grains_; }
  uint64_t units() const { return units_; }
  uint32_t entry_bytes() const { return entry_bytes_; }

  // ---- Entries.
  uint64_t Get(uint64_t v) const {
    return wide_ ? map64_.Load(v) : map32_.Load(v);
  }
  // Map blocks: runs of kBlockGrains entries. A block in which no entry was ever set holds only
  // kUnmapped, so a walk over the map (Check, a layer's scrub, MapExtents) skips it and costs
  // what was written, not the virtual size. Returns the first grain at or after v in a block
  // that an entry was ever set in; grains() if there is none.
  static constexpr uint64_t kBlockGrains = 1024;
  uint64_t NextWritten(uint64_t v) const;
  // Calls f(v, entry) for each grain of [first, end) whose entry is not kUnmapped, in order,
  // walking only the map blocks ever written: it costs what was written, not the virtual size.
  template <typename F>
  void ForEachMapped(uint64_t first, uint64_t end, F&& f) const {
    end = std::min(end, grains_);
    for (uint64_t v = NextWritten(first); v < end; v = NextWritten(v + 1)) {
      const uint64_t e = Get(v);
      if (e != kUnmapped) f(v, e);
    }
  }
  // Sets v's entry while loading (a journal replayed over a checkpoint may set one several
  // times), counting the change of usage and references as it goes, so that opening costs what
  // was loaded, not the virtual size: FinishLoad walks the units referenced, never the map.
  void Load(uint64_t v, uint64_t e);
  // The units a loaded entry referenced, in blocks of kBlockGrains units: the first unit at or
  // after u in such a block, units() if there is none. Walks after the load (FinishLoad, a
  // layer's rebuild of what it derives) cost the units used, not the device below's size.
  uint64_t NextLoadedUnit(uint64_t u) const;
  // Sets v's entry and counts nothing: the damage a test of Check needs (an entry that no
  // reference or allocation backs). Never on a layer's path.
  void OverwriteUncounted(uint64_t v, uint64_t e) { Exchange(v, e); }
  // Entering and leaving the read generation (see above): between them, the units of the
  // entries looked up are not reused. Returns the generation to leave.
  uint64_t Enter(Journal& j);
  void Leave(Journal& j, uint64_t gen) {
    j.readers[gen & 1].fetch_sub(1, std::memory_order_release);
  }

  // ---- Grain locks: try-locks, never waits. False (nothing held) if any grain is locked.
  bool TryLock(uint64_t first, uint64_t count);
  void Unlock(uint64_t first, uint64_t count);

  // ---- A queue's share.
  struct Journal {
    std::mutex mu;
    std::vector<uint64_t> grains, stored, released;
    std::atomic<uint64_t> next{0}, end{0};  // the reserve's current run: free units [next, end)
    // The reserve's other runs, [spare_first[i], spare_end[i]) for i < spares, taken with the
    // current one under one lock of the allocator: after random overwrites the free space
    // comes in runs of a few units, and a lock per run made the allocator's a global lock on
    // the data path. The owner's thread changes them; others read them (usage, Check) as they
    // read next and end.
    static constexpr uint32_t kSpareRuns = 15;
    std::atomic<uint64_t> spare_first[kSpareRuns] = {}, spare_end[kSpareRuns] = {};
    std::atomic<uint32_t> spares{0};
    uint64_t reserved() const;  // units in the reserve, all runs
    // Calls f(first, end) for each run of the reserve, the current one first.
    template <class F>
    void ForEachReservedRun(F&& f) const {
      constexpr auto kRelaxed = std::memory_order_relaxed;
      f(next.load(kRelaxed), end.load(kRelaxed));
      for (uint32_t i = 0; i < spares.load(kRelaxed); ++i) {
        f(spare_first[i].load(kRelaxed), spare_end[i].load(kRelaxed));
      }
    }
    FlatMap<uint32_t> held;  // units the queue holds (Hold) -> holds; its thread's, and Check's
    // Usage deltas, written by the owner thread only.
    std::atomic<int64_t> live{0}, zeros{0}, used{0};
    bool closed = false;
    alignas(64) std::atomic<uint32_t> readers[2] = {};  // in generations of parity 0 and 1
    // The owner's thread is in the queue (OwnerActivity): its reserve is its own. Outside, the
    // queue is idle and another queue short of units may take the reserve back (`steal` set
    // while it does). A Dekker pair: each side stores its flag, then reads the other's.
    std::atomic<bool> active{false}, steal{false};
    uint32_t depth = 0;  // owner only: nested OwnerActivity scopes
  };
  // Marks the owner's thread in its queue (a GrainQueue's Submit and Poll) for its lifetime:
  // the queue's reserve is not taken back meanwhile; on entry it waits for a take-back running.
  class OwnerActivity {
   public:
    explicit OwnerActivity(Journal& j);
    ~OwnerActivity();
    OwnerActivity(const OwnerActivity&) = delete;
    OwnerActivity& operator=(const OwnerActivity&) = delete;

   private:
    Journal& j_;
  };
  Journal* Attach();
  // Journals attached and not yet dropped (the tests count them).
  size_t journal_count() const {
    std::lock_guard lock(journals_mu_);
    return journals_.size();
  }
  // The queue is gone: its reserve goes back; its records wait for the next commit, and a
  // journal without any goes at once.
  void Detach(Journal* j);

  // ---- Changes, holding j.mu (std::lock_guard lock(j.mu)).
  // Points locked grain v at `e`, dropping the reference of its old entry. With `counted`
  // false, e's unit gets a reference (else the caller took it: AddRef).
  void Remap(Journal& j, uint64_t v, uint64_t e, bool counted);
  void AddRef(Journal& j, uint64_t unit);
  void DropRef(Journal& j, uint64_t unit);
  // A reference the queue holds besides map entries (GrainIo::Hold: a bin being filled),
  // counted for Check. Unhold drops one the queue holds.
  void Hold(Journal& j, uint64_t unit);
  void Unhold(Journal& j, uint64_t unit);
  // Takes back a reference AddRef took on a unit that no entry ever named and that the caller
  // is about to give back (GiveBack): a failed write's share of a grain it stored itself. Not a
  // release, so no commit frees the unit a second time.
  void CancelRef(Journal& j, uint64_t unit);
  // Records that `unit` holds new content whose record (the layer's per-unit table) must be
  // journaled.
  void Stored(Journal& j, uint64_t unit) { j.stored.push_back(unit); }
  uint32_t refs(uint64_t unit) const { return refs_.Load(unit); }

  // ---- Allocation, owner thread only. Reserve makes sure that the next `n` TakeUnit calls
  // return consecutive units if the free space allows (else they return shorter runs, or
  // fail): from the reserve's current run, else from a spare run, else (under the allocator's
  // lock) from new runs, and when those fall short of `n`, after taking back the reserves of
  // idle queues (their threads elsewhere: a server's idle workers held most of a small
  // device's free space, and writes failed with ENOSPC while it was free); TakeUnit returns a
  // free unit, or false when there is none (a commit may free some).
  void Reserve(Journal& j, uint64_t n);
  bool TakeUnit(Journal& j, uint64_t* unit);
  // A unit TakeUnit returned that was never referenced (its write failed): free it at once.
  void GiveBack(uint64_t unit);
  // How many times a queue's reserve was refilled under the allocator's lock, all queues.
  uint64_t reserve_refills() const { return refills_.load(std::memory_order_relaxed); }

  // ---- Commits. A cut of every journal; entries of the grains remapped before it.
  struct Capture {
    uint64_t epoch = 0;
    std::vector<std::pair<uint64_t, uint64_t>> grains;  // (grain, entry), by grain, once each
    std::vector<uint64_t> stored;                       // units, once each
    std::vector<uint64_t> released;
  };
  Capture TakeCapture();
  // A failed commit: the capture's records and releases go to the next one.
  void Restore(Capture c);
  // The commit of `c` is durable: frees its released units that are still unreferenced once no
  // reader that may have looked them up remains (else at a later commit). The layer has the
  // last word: reclaim(units, free_if) calls free_if(u) for each candidate under its own lock
  // (dedup's index shard, which its hits take references under), and free_if says whether u
  // is free now. Appends the freed units to `freed`.
  using Reclaimer = std::function<void(std::span<const uint64_t>,
                                       const std::function<bool(uint64_t)>&)>;
  void Reclaim(Capture& c, const Reclaimer& reclaim, std::vector<uint64_t>* freed);
  // Units neither in use nor in a queue's reserve. (Units in use without a reference are
  // usage().allocated - usage().used: released and awaiting a commit or, after one, other
  // queues' readers; or in a write in flight.)
  uint64_t free_units() const;
  // The same without the allocator's lock, as of its last change (lock-free, possibly a little
  // stale): for a heuristic on the data path (GrainDevice::commit_due).
  uint64_t free_units_hint() const { return free_hint_.load(std::memory_order_relaxed); }
  // Discards below (see GrainDevice::Commit): the allocator's calls, under its mutex.
  void TakeAged(std::vector<uint64_t>* out, uint64_t keep, uint64_t min_run);
  void TakeStale(std::vector<uint64_t>* out);
  void FinishDiscard(const std::vector<uint64_t>& units);

  // ---- Loading and checking.
  // After every entry is loaded: marks the referenced units used in the allocator and takes
  // the usage Load counted. Its cost is one look per unit (physical), none per virtual grain.
  void FinishLoad();
  struct Usage {
    uint64_t live = 0;   // grains mapped (not kUnmapped)
    uint64_t zeros = 0;  // grains kZero
    uint64_t used = 0;   // units with a reference
    uint64_t allocated = 0;  // units not free (used, reserved, in flight, awaiting a commit)
  };
  Usage usage() const;
  // References against the map (plus the queues' holds), units the map uses that the
  // allocator has free, and units allocated but unused (lost; freed with a repair mode). `who`
  // names the layer and the kind of unit ("zstd: bin").
  void Check(CheckMode mode, const std::string& who, CheckResult* out);
  // Bytes of memory the map takes: its arrays' pages written so far (reserved, they are sized
  // by the device; WrittenPageBytes) and the allocator's.
  uint64_t memory_bytes() const;

 private:
  void GiveBackReserve(Journal& j);
  // Takes back the reserves of the queues other than `self` that are idle (not in an
  // OwnerActivity). True if any units came back. Tries journals_mu_ (false, nothing taken
  // back, if a commit holds it), then takes alloc_mu_.
  bool TakeBackIdleReserves(const Journal& self);
  // The allocation loop of Reserve: runs until the reserve holds `want` units. REQUIRES:
  // alloc_mu_. Returns the units taken.
  uint64_t FillReserve(Journal& j, uint64_t n, uint64_t want);
  // Frees a unit the allocator has in use; a unit already free is counted (freed_twice_, which
  // Check reports as corruption) and left alone. REQUIRES: alloc_mu_.
  void FreeUnit(uint64_t unit);
  // No reader of a generation of this parity is left. REQUIRES: journals_mu_.
  bool Drained(uint64_t parity) const;
  // Every change of an entry: marks its block written first (an atomic or once per block).
  uint64_t Exchange(uint64_t v, uint64_t e) {
    written_.Set(v / kBlockGrains, std::memory_order_release);
    return wide_ ? map64_[v].exchange(e) : map32_[v].exchange(static_cast<uint32_t>(e));
  }

  const uint64_t grains_, units_;
  const uint32_t entry_bytes_;
  const bool wide_;
  AtomicArray<uint32_t> map32_;
  AtomicArray<uint64_t> map64_;
  AtomicBits written_;                 // a bit per map block (see NextWritten)
  AtomicBits loaded_units_;            // a bit per block of units (see NextLoadedUnit)
  AtomicArray<uint64_t> locks_;        // a bit per grain
  AtomicBits dirty_;                   // a bit per grain remapped since the last cut
  AtomicArray<uint32_t> refs_;         // per unit
  AtomicArray<uint32_t> released_in_;  // per unit: epoch of its release, 0 if not released
  std::atomic<uint32_t> epoch_{1};
  std::atomic<uint64_t> gen_{2};       // the read generation
  // Released units freed by a durable commit but waiting for readers: (unit, generation it
  // waits out). Under journals_mu_.
  std::vector<std::pair<uint64_t, uint64_t>> waiting_;

  mutable std::mutex journals_mu_;  // the list; a capture holds it and every journal's mutex
  std::vector<std::unique_ptr<Journal>> journals_;
  Usage base_;           // usage of detached journals and of the load; under journals_mu_
  std::atomic<uint64_t> loaded_live_{0}, loaded_zeros_{0};  // Load's count so far
  Capture carry_;        // records and releases of failed commits

  mutable std::mutex alloc_mu_;
  BitmapAllocator alloc_;  // under alloc_mu_
  std::atomic<uint64_t> free_hint_;  // alloc_.free() at its last change (NoteFree)
  void NoteFree() { free_hint_.store(alloc_.free(), std::memory_order_relaxed); }  // alloc_mu_
  uint64_t freed_twice_ = 0;  // under alloc_mu_
  std::atomic<uint64_t> refills_{0};  // Reserve's refills (reserve_refills)
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_GRAINMAP_UNIT_MAP_H_
