// The zstd engine: the state of the compression layer, without I/O (the device adapter
// compresses, reads and writes, and calls in here). Thread-safe: one mutex, held only for
// table updates; compression runs outside it, in parallel on every queue's thread.
//
// Physical space is cut into bins of one grain. A grain is stored raw in a bin of its own, or
// as a compressed fragment packed with others into a bin that one queue fills at a time (one of
// its open bins). State:
//  - the map: one 64-bit entry per virtual grain: kUnmapped, kZero, or a fragment
//    {bin, offset in the bin, compressed length; length 0 = raw};
//  - the bin table: per bin, the number of live fragments in it;
//  - a next-fit allocator of bins, the set of open bins, copy-on-write reuse (unit_reclaimer.h:
//    a bin whose last fragment goes away is reused only after a commit made that durable and no
//    reader has it pinned), per-virtual-grain write locks.
// Persistent changes go to the MetaStore (if any) as absolute records, one group per grain.
#ifndef VSTACK_BLOCKDEV_ZSTD_ZSTD_ENGINE_H_
#define VSTACK_BLOCKDEV_ZSTD_ZSTD_ENGINE_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "blockdev/grainmap/grain_map.h"
#include "blockdev/zstd/size_rule.h"
#include "lib/block_device.h"

namespace vstack {

// The map, locks, pins, allocator, reclaimer and commits are GrainMap's (grain_map.h): its
// units are bins. What is zstd's own: fragments, live counts per bin and open bins.
class ZstdEngine : public GrainMap<ZstdEngine, uint64_t> {
 public:
  static constexpr uint64_t kUnmapped = 0;
  static constexpr uint64_t kZero = 1;
  static constexpr uint64_t kMaxBins = 0xFFFFFFFFull - 2;

  static constexpr uint32_t kMapTable = 0;  // 8-byte map entries, one per virtual grain
  static constexpr uint32_t kBinTable = 1;  // 4-byte live fragment counts, one per bin
  static constexpr uint32_t kMapEntryBytes = 8;
  static constexpr uint32_t kBinEntryBytes = 4;

  // Where a grain's bytes are: `length` compressed bytes at `offset` of `bin`, or (length 0) the
  // whole bin, raw.
  struct Fragment {
    uint32_t bin = 0;
    uint32_t offset = 0;
    uint32_t length = 0;
    bool raw() const { return length == 0; }
  };
  static uint64_t Encode(const Fragment& f);
  // REQUIRES: entry is neither kUnmapped nor kZero.
  static Fragment Decode(uint64_t entry);
  static bool IsFragment(uint64_t entry) { return entry > kZero; }

  // `store` may be null (tests, read-only blank devices).
  ZstdEngine(uint64_t virtual_grains, uint64_t bins, uint32_t grain, SizeRule rule,
             MetaStore* store);

  // ---- Loading: LoadEntry is the MetaStore::Load sink (it rejects fragments that do not fit
  // in their bin); FinishLoad derives the live counts and the allocator from the map.
  Status LoadEntry(uint32_t table, uint64_t index, const uint8_t* entry);
  void FinishLoad();

  // ---- Writes. Every write of a grain holds its lock (Lock or LockForRmw, GrainMap) from
  // before it reads or compresses until Remap (or Unlock).
  // Points locked v at `entry` (kZero, kUnmapped, or a fragment whose bytes are written),
  // releasing what it pointed at, and unlocks it.
  void Remap(uint64_t v, uint64_t entry);

  // ---- Bins. A raw grain gets a bin of its own (open = false); a queue packs fragments into
  // an open bin until it closes it. Nullopt: no free bin (a commit may free some:
  // pending_frees() > 0).
  std::optional<uint32_t> AllocateBin(bool open);
  void CloseBin(uint32_t bin);
  // A raw bin whose write failed: never referenced, free it at once.
  void FreeUnusedBin(uint32_t bin);

  // ---- Reads (LookupForRead, Unpin, MapEntries) and commits (TakeSnapshot, FinishCommit,
  // pending_bytes, pending_frees): GrainMap.

  // ---- Accounting.
  struct Usage {
    uint64_t live_grains = 0;       // map entries other than kUnmapped
    uint64_t zero_grains = 0;
    uint64_t stored_grains = 0;     // grains with a fragment (raw or compressed)
    uint64_t raw_grains = 0;
    uint64_t compressed_bytes = 0;  // compressed lengths, the grain for raw ones
    uint64_t stored_bytes = 0;      // sizes under the stored-size rule
    uint64_t allocated_bins = 0;
  };
  Usage usage() const;
  // The same figures for virtual grains [first, first+count) only; allocated_bins: the bins
  // that hold at least one of their fragments (whole, even if they share them with others).
  Usage UsageOf(uint64_t first, uint64_t count) const;
  uint32_t grain() const { return grain_; }
  const SizeRule& rule() const { return rule_; }
  uint64_t bins() const { return alloc_.units(); }

  // ---- Checking (no I/O): live counts against the map (as stored on disk and in memory),
  // fragments that overlap in a bin (doubly-used space), and bins allocated but unused (lost).
  // Repair modes record corrected counts for the next commit and free lost bins.
  void Check(CheckMode mode, CheckResult* out);
  // Every fragment with one virtual grain that uses it, for a content check.
  std::vector<std::pair<uint64_t, Fragment>> Fragments() const;

 private:
  friend class GrainMap<ZstdEngine, uint64_t>;
  static bool HasUnit(uint64_t e) { return IsFragment(e); }
  static uint64_t UnitOf(uint64_t e) { return Decode(e).bin; }
  void FreeUnit(uint64_t bin) { alloc_.Free(bin); }

  // All REQUIRE mu_.
  void SetMap(uint64_t v, uint64_t entry);
  void SetBinCount(uint32_t bin, uint32_t count);
  // Adds (sign +1) or removes (-1) the figures of one map entry.
  void Account(Usage& u, uint64_t entry, int sign) const;
  uint32_t SlotOf(const Fragment& f) const;

  const uint32_t grain_;
  const SizeRule rule_;
  ChunkedArray<uint32_t> live_;  // live fragments per bin
  FlatSet open_;
  std::unordered_map<uint32_t, uint32_t> stored_counts_;  // loaded count where it differs
  Usage usage_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_ZSTD_ZSTD_ENGINE_H_
