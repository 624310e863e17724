// MappedLayer<Engine>: a grain layer whose whole state is one engine over a MetaStore (dedup,
// zstd). It owns the store and the engine and does, the same way for each, what surrounds the
// engine: creating the store (format) or attaching and loading it, group commits, the commit
// at close, MapExtents and the journal figures of `vstack info`.
//
// Engine: LoadEntry(table, index, entry) -> Status; FinishLoad(); TakeSnapshot() -> a Snapshot
// with a `MetaBatch batch`; FinishCommit(Snapshot, bool, discard*, keep); TakeStale(discard*);
// FinishDiscard(units); pending_bytes();
// MapEntries(first, count, std::vector<Entry>*); and map entry constants kUnmapped and kZero.
#ifndef VSTACK_BLOCKDEV_GRAINMAP_MAPPED_LAYER_H_
#define VSTACK_BLOCKDEV_GRAINMAP_MAPPED_LAYER_H_

#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "blockdev/grainmap/grain_layer.h"
#include "blockdev/metastore/meta_store.h"

namespace vstack {

// The capabilities of a mapping layer: it reads, flushes and reports extents; writable, it
// discards and zeroes by remapping (fast, and discarded grains read as zeros).
inline constexpr Capabilities kMappedOwnCaps = kCapRead | kCapFlush | kCapExtents;
inline constexpr Capabilities kMappedWriteCaps =
    kCapWrite | kCapDiscard | kCapWriteZeroes | kCapDiscardZeroes | kCapFastZeroes;

// Appends the journal figures of `store` (none if null).
void AppendJournalProperties(MetaStore* store, PropertyList& out);

// Creates the store of a blank device: formats `sb` onto `lower`, or (read-only) nothing.
Result<std::unique_ptr<MetaStore>> FormatUnlessReadOnly(BlockDevice& lower, const Superblock& sb,
                                                         bool read_only, const char* layer);

template <class Engine>
class MappedLayer : public GrainLayer {
 public:
  Engine& engine() { return *engine_; }
  const Engine& engine() const { return *engine_; }
  // Commits every finished operation's metadata (group commit; blocks the caller). The units
  // whose release it made durable become free at once and are reused first (no discard needed:
  // they are about to be rewritten). Units that then stay free and unused for a whole commit
  // interval are discarded on the device below (if it discards), so that a thin device below
  // (zstd, a dynamic VHD, a sparse file) gets back the space of what was overwritten or
  // discarded here: at the next commit, in merged runs of at least 32 KiB submitted together,
  // and only once more than 4 MiB of free units hold old bytes below. With `discard_all`
  // (close; a write that the device below refused for lack of space), every such unit is
  // discarded. A unit being discarded cannot be allocated until its discard has completed.
  Status Commit(bool discard_all = false) {
    if (!store_ || store_->read_only()) return OkStatus();
    auto lock = store_->LockCommits();
    const bool discards = lower_device().Has(kCapDiscard);
    std::vector<uint64_t> units;
    if (discards && discard_all) {
      // First what is free already: the commit's own journal write may need that room below.
      engine_->TakeStale(&units);
      if (!units.empty()) DiscardUnits(units);
      units.clear();
    }
    auto snap = engine_->TakeSnapshot();
    Status s = store_->Commit(&snap.batch);
    engine_->FinishCommit(std::move(snap), s.has_value(), discards ? &units : nullptr,
                          kKeepStaleBytes / grain(),
                          std::max<uint64_t>(1, kMinDiscardRunBytes / grain()));
    if (discards && discard_all) engine_->TakeStale(&units);
    if (!units.empty()) DiscardUnits(units);
    CountShared(commits_counter_);
    return s;
  }
  // A commit is due once this many bytes of metadata records are pending.
  size_t commit_threshold() const { return commit_threshold_; }
  // True once the pending records passed the threshold: the queue commits before its next
  // batch of requests.
  bool commit_due() const { return engine_->pending_bytes() > commit_threshold_; }

  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override {
    VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
    constexpr uint64_t kBatch = 4096;  // map entries looked up per lock
    const uint64_t g = grain();
    std::vector<std::remove_const_t<decltype(Engine::kZero)>> entries;
    uint64_t batch_first = 0;
    for (uint64_t pos = offset; pos < offset + length;) {
      const uint64_t v = pos / g;
      if (entries.empty() || v >= batch_first + entries.size()) {
        entries.clear();
        batch_first = v;
        const uint64_t last = (offset + length - 1) / g;
        engine_->MapEntries(v, std::min<uint64_t>(kBatch, last - v + 1), &entries);
      }
      const uint64_t end = std::min<uint64_t>((v + 1) * g, offset + length);
      const auto e = entries[v - batch_first];
      uint32_t flags = 0;
      if (e == Engine::kUnmapped) flags = kExtentHole | kExtentZero;
      if (e == Engine::kZero) flags = kExtentZero;
      AppendExtent(out, pos, end - pos, flags);
      pos = end;
    }
    return OkStatus();
  }

 protected:
  // `store` is null on a read-only blank device; make_engine(store) makes the engine over
  // it. `commits_counter`: the layer's counter of commits, followed by its counters of
  // discard requests sent below ("discards") and of the bytes they discarded
  // ("discarded_bytes").
  template <class MakeEngine>
  MappedLayer(std::string kind, DevicePtr lower, uint32_t grain, uint64_t size,
              uint64_t data_offset, std::unique_ptr<MetaStore> store, MakeEngine make_engine,
              bool read_only, size_t commits_counter)
      : GrainLayer(std::move(kind), std::move(lower), grain, size, data_offset, kMappedOwnCaps,
                   kMappedWriteCaps, read_only),
        store_(std::move(store)),
        engine_(make_engine(store_.get())),
        commits_counter_(commits_counter) {
    if (store_) commit_threshold_ = store_->superblock().journal_bytes / 4;
  }

  // The last step of Open: a formatted (or blank read-only) device starts empty; an attached
  // one loads its tables and replays its journal.
  Status Load(bool blank) {
    if (blank) {
      engine_->FinishLoad();
      return OkStatus();
    }
    return LoadEngine(*store_, *engine_, kind().c_str());
  }

  Status CloseLayer() override {
    if (!store_) return OkStatus();
    Status s = Commit(/*discard_all=*/true);
    auto lock = store_->LockCommits();
    Status c = store_->Close();
    return s ? c : s;
  }

  MetaStore* store() const { return store_.get(); }
  // The end of Check: commits if it repaired something (`repaired_before`: out->repaired
  // before it ran), then releases the store's queue of the device below (BlockDevice::Check).
  Status CommitRepairs(const CheckResult& out, uint64_t repaired_before) {
    Status s = OkStatus();
    if (out.repaired > repaired_before && store_ && !store_->read_only()) s = Commit();
    if (store_) {
      auto lock = store_->LockCommits();
      store_->ReleaseQueue();
    }
    return s;
  }

 private:
  static constexpr uint64_t kKeepStaleBytes = 4 << 20;  // free units left for reuse
  // Between closes, only runs of free units at least this long are discarded (as OpenZFS's
  // autotrim skips extents below `zfs_trim_extent_bytes_min`, 32 KiB by default): a lone 4 KiB
  // unit is likely reused soon, and a hole punch in a file costs the file about one I/O
  // (ext4 waits for the file's direct I/O in flight), so discarding scattered units one by
  // one cost random overwrites most of their speed. Shorter runs stay stale: reused first,
  // discarded at close or when the device below runs out of space.
  static constexpr uint64_t kMinDiscardRunBytes = 32 << 10;

  // Discards the units (handed out by the engine) on the device below, in merged runs, then
  // frees them. REQUIRES: the commit lock.
  void DiscardUnits(std::vector<uint64_t>& units) {
    std::sort(units.begin(), units.end());
    std::vector<std::pair<uint64_t, uint64_t>> runs;
    for (size_t i = 0; i < units.size();) {
      size_t j = i + 1;
      while (j < units.size() && units[j] == units[j - 1] + 1) ++j;
      runs.emplace_back(data_offset() + units[i] * grain(), (j - i) * uint64_t{grain()});
      i = j;
    }
    const uint64_t bytes = store_->Discard(runs);
    engine_->FinishDiscard(units);
    CountShared(commits_counter_ + 1, runs.size());
    CountShared(commits_counter_ + 2, bytes);
  }

  std::unique_ptr<MetaStore> store_;  // null on a read-only blank device
  std::unique_ptr<Engine> engine_;
  const size_t commits_counter_;
  size_t commit_threshold_ = 0;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_GRAINMAP_MAPPED_LAYER_H_
