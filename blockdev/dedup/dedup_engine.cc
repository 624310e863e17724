#include "blockdev/dedup/dedup_engine.h"

#include <algorithm>
#include <cstring>

#include "lib/endian.h"
#include "lib/plural.h"

namespace vstack {
namespace {

constexpr size_t kInitialSlots = 1024;
constexpr uint64_t kMaxLoadPercent = 80;

}  // namespace

DedupEngine::DedupEngine(uint64_t virtual_grains, uint64_t physical_grains, MetaStore* store)
    : GrainMap(virtual_grains, physical_grains, store),
      grains_(physical_grains),
      tags_(kInitialSlots, 0),
      slots_(kInitialSlots, 0) {}

Fingerprint DedupEngine::FpOf(const GrainRec& r) {
  return Fingerprint{uint64_t{r.fp[0]} | uint64_t{r.fp[1]} << 32,
                     uint64_t{r.fp[2]} | uint64_t{r.fp[3]} << 32};
}

void DedupEngine::SetFp(GrainRec& r, const Fingerprint& fp) {
  r.fp[0] = static_cast<uint32_t>(fp.lo);
  r.fp[1] = static_cast<uint32_t>(fp.lo >> 32);
  r.fp[2] = static_cast<uint32_t>(fp.hi);
  r.fp[3] = static_cast<uint32_t>(fp.hi >> 32);
}

// ---------------------------------------------------------------------------------------------
// Loading

Status DedupEngine::LoadEntry(uint32_t table, uint64_t index, const uint8_t* entry) {
  if (table == kMapTable) {
    const uint32_t e = LoadLE32(entry);
    if (e >= kFirstGrain && e - kFirstGrain >= alloc_.units()) {
      return MakeError(Errc::kCorruption,
                       "map entry of virtual grain " + std::to_string(index) +
                           " points to physical grain " + std::to_string(e - kFirstGrain) +
                           ", beyond the " + std::to_string(alloc_.units()) + " physical grains");
    }
    if (index >= map_.size()) {
      return MakeError(Errc::kCorruption, "map entry " + std::to_string(index) + " out of range");
    }
    map_.At(index) = e;
    return OkStatus();
  }
  if (table == kGrainTable && index < grains_.size()) {
    GrainRec& r = grains_.At(index);
    for (int i = 0; i < 4; ++i) r.fp[i] = LoadLE32(entry + 4 * i);
    r.ref = LoadLE32(entry + 16);
    return OkStatus();
  }
  return MakeError(Errc::kCorruption, "unexpected metadata table " + std::to_string(table));
}

void DedupEngine::FinishLoad() {
  std::lock_guard lock(mu_);
  ChunkedArray<uint32_t> derived(grains_.size());
  live_ = zeros_ = unique_ = 0;
  ForEachEntry([&](uint64_t, uint32_t e) {
    if (e == kUnmapped) return;
    ++live_;
    if (e == kZero) {
      ++zeros_;
    } else {
      ++derived.At(e - kFirstGrain);
    }
  });
  for (uint64_t c = 0; c < grains_.chunks(); ++c) {
    if (grains_.ChunkData(c) == nullptr && derived.ChunkData(c) == nullptr) continue;
    const uint64_t first = c * ChunkedArray<GrainRec>::kChunk;
    const uint64_t n = std::min<uint64_t>(ChunkedArray<GrainRec>::kChunk, grains_.size() - first);
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t p = static_cast<uint32_t>(first + i);
      const uint32_t stored = grains_.Get(p).ref;
      const uint32_t d = derived.Get(p);
      if (stored != d) stored_refs_[p] = stored;
      if (d == 0) {
        if (stored != 0) grains_.At(p).ref = 0;
        continue;
      }
      GrainRec& r = grains_.At(p);
      r.ref = d;
      alloc_.MarkUsed(p);
      ++unique_;
      const Fingerprint fp = FpOf(r);
      if (!(fp == Fingerprint{}) && !IndexFind(fp)) IndexInsert(fp, p);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Index: linear probing over 4-byte slots of physical grain numbers with a 1-byte tag each; the
// fingerprint itself is in grains_.

std::optional<uint32_t> DedupEngine::IndexFind(const Fingerprint& fp) const {
  const uint8_t tag = TagOf(fp);
  const uint64_t n = slots_.size();
  for (uint64_t s = SlotOf(fp);; s = s + 1 == n ? 0 : s + 1) {
    if (tags_[s] == 0) return std::nullopt;
    if (tags_[s] == tag && FpOf(grains_.Get(slots_[s])) == fp) return slots_[s];
  }
}

// REQUIRES: fp is not in the index.
void DedupEngine::IndexInsert(const Fingerprint& fp, uint32_t p) {
  if ((index_entries_ + index_tombstones_ + 1) * 100 > slots_.size() * kMaxLoadPercent) {
    // Purge tombstones; grow by half if the entries alone fill more than 60%.
    const bool grow = (index_entries_ + 1) * 100 > slots_.size() * 60;
    IndexRehash(grow ? slots_.size() * 3 / 2 : slots_.size());
  }
  const uint64_t n = slots_.size();
  uint64_t s = SlotOf(fp);
  while (tags_[s] != 0 && tags_[s] != kTombstone) s = s + 1 == n ? 0 : s + 1;
  if (tags_[s] == kTombstone) --index_tombstones_;
  tags_[s] = TagOf(fp);
  slots_[s] = p;
  ++index_entries_;
}

void DedupEngine::IndexErase(uint32_t p) {
  const Fingerprint fp = FpOf(grains_.Get(p));
  const uint8_t tag = TagOf(fp);
  const uint64_t n = slots_.size();
  for (uint64_t s = SlotOf(fp);; s = s + 1 == n ? 0 : s + 1) {
    if (tags_[s] == 0) return;  // not indexed (a duplicate kept after a collision)
    if (tags_[s] == tag && slots_[s] == p) {
      tags_[s] = kTombstone;
      --index_entries_;
      ++index_tombstones_;
      return;
    }
  }
}

void DedupEngine::IndexRehash(size_t slots) {
  std::vector<uint8_t> old_tags(slots, 0);
  std::vector<uint32_t> old_slots(slots, 0);
  old_tags.swap(tags_);
  old_slots.swap(slots_);
  index_tombstones_ = 0;
  const uint64_t n = slots_.size();
  for (uint64_t i = 0; i < old_slots.size(); ++i) {
    if (old_tags[i] == 0 || old_tags[i] == kTombstone) continue;
    uint64_t s = SlotOf(FpOf(grains_.Get(old_slots[i])));
    while (tags_[s] != 0) s = s + 1 == n ? 0 : s + 1;
    tags_[s] = old_tags[i];
    slots_[s] = old_slots[i];
  }
}

// ---------------------------------------------------------------------------------------------
// State changes (all under mu_).

void DedupEngine::SetMap(uint64_t v, uint32_t entry) {
  uint32_t& e = map_.At(v);
  if (e == entry) return;
  if (e != kUnmapped) --live_;
  if (e == kZero) --zeros_;
  if (entry != kUnmapped) ++live_;
  if (entry == kZero) ++zeros_;
  e = entry;
  if (store_) {
    uint8_t b[4];
    StoreLE32(b, entry);
    store_->Set(kMapTable, v, b);
  }
}

void DedupEngine::RecordGrain(uint32_t p) {
  stored_refs_.erase(p);
  if (!store_) return;
  const GrainRec& r = grains_.Get(p);
  uint8_t b[kGrainEntryBytes];
  for (int i = 0; i < 4; ++i) StoreLE32(b + 4 * i, r.fp[i]);
  StoreLE32(b + 16, r.ref);
  store_->Set(kGrainTable, p, b);
}

void DedupEngine::AddRef(uint32_t p) {
  GrainRec& r = grains_.At(p);
  if (r.ref++ == 0) {
    // Back from the dead before its release was committed: it was never freed.
    ++unique_;
    reclaim_.Revived(p);
  }
  RecordGrain(p);
}

void DedupEngine::Release(uint32_t old_entry) {
  if (old_entry < kFirstGrain) return;
  const uint32_t p = old_entry - kFirstGrain;
  GrainRec& r = grains_.At(p);
  if (--r.ref == 0) {
    --unique_;
    reclaim_.Released(p);
  }
  RecordGrain(p);
}

void DedupEngine::FreeGrain(uint32_t p) {
  IndexErase(p);
  alloc_.Free(p);
}

DedupEngine::ClaimResult DedupEngine::AllocateAndWrite(uint64_t v, const Fingerprint& fp,
                                                       bool indexed) {
  std::optional<uint64_t> p = alloc_.Allocate();
  if (!p) {
    locked_.Erase(v);
    return {Claim::kNoSpace};
  }
  const uint32_t g = static_cast<uint32_t>(*p);
  GrainRec& r = grains_.At(g);
  SetFp(r, fp);
  r.ref = 0;
  if (indexed) IndexInsert(fp, g);
  writing_[g] = indexed;
  return {Claim::kWrite, g};
}

// ---------------------------------------------------------------------------------------------
// Writes

DedupEngine::ClaimResult DedupEngine::ClaimWrite(uint64_t v, bool zero, const Fingerprint& fp,
                                                 bool verify, bool locked) {
  std::lock_guard lock(mu_);
  if (!locked && locked_.Contains(v)) return {Claim::kBusy};
  if (zero) {
    const uint32_t old = map_.Get(v);
    SetMap(v, kZero);
    Release(old);
    if (store_) store_->EndGroup();
    if (locked) locked_.Erase(v);
    return {Claim::kDone};
  }
  if (std::optional<uint32_t> hit = IndexFind(fp)) {
    const uint32_t p = *hit;
    if (writing_.Contains(p)) return {Claim::kBusy};  // an identical grain is on its way down
    if (verify) {
      locked_.Insert(v);
      reclaim_.Pin(p);
      return {Claim::kVerify, p};
    }
    const uint32_t old = map_.Get(v);
    AddRef(p);
    SetMap(v, kFirstGrain + p);
    Release(old);
    if (store_) store_->EndGroup();
    if (locked) locked_.Erase(v);
    return {Claim::kDone};
  }
  locked_.Insert(v);
  return AllocateAndWrite(v, fp, /*indexed=*/true);
}

DedupEngine::ClaimResult DedupEngine::FinishVerify(uint64_t v, uint32_t pgrain,
                                                   const Fingerprint& fp, bool equal) {
  std::lock_guard lock(mu_);
  if (equal) {
    const uint32_t old = map_.Get(v);
    AddRef(pgrain);
    SetMap(v, kFirstGrain + pgrain);
    Release(old);
    if (store_) store_->EndGroup();
    UnpinLocked(pgrain);
    locked_.Erase(v);
    return {Claim::kDone};
  }
  UnpinLocked(pgrain);
  ++collisions_;
  return AllocateAndWrite(v, fp, /*indexed=*/false);
}

void DedupEngine::FinishWrite(uint64_t v, uint32_t pgrain, const Fingerprint& fp, bool ok) {
  std::lock_guard lock(mu_);
  const bool* w = writing_.Find(pgrain);
  const bool indexed = w != nullptr && *w;
  writing_.Erase(pgrain);
  if (ok) {
    const uint32_t old = map_.Get(v);
    AddRef(pgrain);
    SetMap(v, kFirstGrain + pgrain);
    Release(old);
    if (store_) store_->EndGroup();
  } else {
    if (!indexed) {
      alloc_.Free(pgrain);  // not in the index
    } else {
      FreeGrain(pgrain);
    }
  }
  locked_.Erase(v);
}

DedupEngine::Claim DedupEngine::SetZero(uint64_t v, bool unmap, bool locked) {
  std::lock_guard lock(mu_);
  if (!locked && locked_.Contains(v)) return Claim::kBusy;
  const uint32_t old = map_.Get(v);
  SetMap(v, unmap ? kUnmapped : kZero);
  Release(old);
  if (store_) store_->EndGroup();
  if (locked) locked_.Erase(v);
  return Claim::kDone;
}

// ---------------------------------------------------------------------------------------------
// Accounting and checking

DedupEngine::Usage DedupEngine::usage() const {
  std::lock_guard lock(mu_);
  Usage u;
  u.live_grains = live_;
  u.zero_grains = zeros_;
  u.unique_grains = unique_;
  u.allocated_grains = alloc_.used();
  u.index_entries = index_entries_;
  u.index_memory_bytes = tags_.capacity() + slots_.capacity() * sizeof(uint32_t) +
                         grains_.memory_bytes() + alloc_.memory_bytes();
  u.map_memory_bytes = map_.memory_bytes();
  u.collisions = collisions_;
  return u;
}

void DedupEngine::Check(CheckMode mode, CheckResult* out) {
  std::lock_guard lock(mu_);
  // Reference counts derived from the map, against the counts in memory.
  ChunkedArray<uint32_t> derived(grains_.size());
  ForEachEntry([&](uint64_t, uint32_t e) {
    if (e >= kFirstGrain) ++derived.At(e - kFirstGrain);
  });
  for (uint64_t p = 0; p < grains_.size(); ++p) {
    const uint32_t d = derived.Get(p);
    const uint32_t ref = grains_.Get(p).ref;
    const std::string name = "dedup: physical grain " + std::to_string(p);
    if (d != ref) {
      out->Corruption(name + ": reference count " + std::to_string(ref) + " in memory but " +
                      Counted(d, "map entry uses", "map entries use") + " it");
    }
    if (d > 0 && !alloc_.IsUsed(p)) {
      out->Corruption(name + ": used by the map but free in the allocator (doubly usable)");
    }
    if (d > 0) {
      const Fingerprint fp = FpOf(grains_.Get(p));
      if (!IndexFind(fp)) out->Corruption(name + ": its fingerprint is not in the index");
    }
    if (d == 0 && alloc_.IsUsed(p) && !writing_.Contains(p) &&
        !reclaim_.pending(p)) {
      out->Leak(name + ": allocated but unused (lost)");
      if (mode != CheckMode::kReadOnly) {
        alloc_.Free(p);
        IndexErase(static_cast<uint32_t>(p));
        ++out->repaired;
      }
    }
  }
  // Reference counts as stored on disk (loaded at open and not rewritten since).
  std::vector<std::pair<uint32_t, uint32_t>> stored(stored_refs_.begin(), stored_refs_.end());
  std::sort(stored.begin(), stored.end());
  for (const auto& [p, s] : stored) {
    const uint32_t actual = grains_.Get(p).ref;
    const std::string msg = "dedup: physical grain " + std::to_string(p) +
                            ": stored reference count " + std::to_string(s) + " but " +
                            Counted(actual, "map entry uses", "map entries use") + " it";
    if (s > actual) {
      out->Leak(msg + (actual == 0 ? " (lost grain)" : ""));
    } else {
      out->Corruption(msg + " (used more often than counted)");
    }
    if (mode == CheckMode::kRepairAll || (mode == CheckMode::kRepairLeaks && s > actual)) {
      RecordGrain(p);  // rewrite the count (and the fingerprint) at the next commit
      if (store_) store_->EndGroup();
      ++out->repaired;
    }
  }
}

std::vector<DedupEngine::UsedGrain> DedupEngine::UsedGrains() const {
  std::lock_guard lock(mu_);
  std::vector<UsedGrain> out;
  std::unordered_map<uint32_t, size_t> at;
  ForEachEntry([&](uint64_t v, uint32_t e) {
    if (e < kFirstGrain) return;
    const uint32_t p = e - kFirstGrain;
    if (at.emplace(p, out.size()).second) out.push_back({p, FpOf(grains_.Get(p)), v});
  });
  std::sort(out.begin(), out.end(),
            [](const UsedGrain& a, const UsedGrain& b) { return a.pgrain < b.pgrain; });
  return out;
}

}  // namespace vstack
