#include "blockdev/zstd/zstd_engine.h"

#include <algorithm>
#include <map>

#include "lib/endian.h"
#include "lib/plural.h"

namespace vstack {

uint64_t ZstdEngine::Encode(const Fragment& f) {
  return (uint64_t{f.bin} + 2) | uint64_t{f.offset} << 32 | uint64_t{f.length} << 48;
}

ZstdEngine::Fragment ZstdEngine::Decode(uint64_t entry) {
  return Fragment{static_cast<uint32_t>((entry & 0xFFFFFFFF) - 2),
                  static_cast<uint32_t>((entry >> 32) & 0xFFFF),
                  static_cast<uint32_t>(entry >> 48)};
}

ZstdEngine::ZstdEngine(uint64_t virtual_grains, uint64_t bins, uint32_t grain, SizeRule rule,
                       MetaStore* store)
    : GrainMap(virtual_grains, bins, store), grain_(grain), rule_(rule), live_(bins) {}

uint32_t ZstdEngine::SlotOf(const Fragment& f) const {
  return f.raw() ? grain_ : ApplySizeRule(rule_, grain_, f.length).slot;
}

void ZstdEngine::Account(Usage& u, uint64_t entry, int sign) const {
  auto add = [sign](uint64_t& field, uint64_t v) { field += sign > 0 ? v : -v; };  // mod 2^64
  if (entry == kUnmapped) return;
  add(u.live_grains, 1);
  if (entry == kZero) return add(u.zero_grains, 1);
  const Fragment f = Decode(entry);
  add(u.stored_grains, 1);
  if (f.raw()) add(u.raw_grains, 1);
  add(u.compressed_bytes, f.raw() ? grain_ : f.length);
  add(u.stored_bytes, SlotOf(f));
}

// ---------------------------------------------------------------------------------------------
// Loading

Status ZstdEngine::LoadEntry(uint32_t table, uint64_t index, const uint8_t* entry) {
  if (table == kMapTable && index < map_.size()) {
    const uint64_t e = LoadLE64(entry);
    if (IsFragment(e)) {
      const Fragment f = Decode(e);
      const uint64_t tag = e & 0xFFFFFFFF;
      const bool fits = f.raw() ? f.offset == 0 : uint64_t{f.offset} + f.length <= grain_;
      if (tag - 2 >= alloc_.units() || !fits) {
        return MakeError(Errc::kCorruption,
                         "map entry of virtual grain " + std::to_string(index) + " (bin " +
                             std::to_string(tag - 2) + ", offset " + std::to_string(f.offset) +
                             ", length " + std::to_string(f.length) + ") lies outside the " +
                             std::to_string(alloc_.units()) + " bins of " +
                             std::to_string(grain_) + " bytes");
      }
    }
    map_.At(index) = e;
    return OkStatus();
  }
  if (table == kBinTable && index < live_.size()) {
    live_.At(index) = LoadLE32(entry);
    return OkStatus();
  }
  return MakeError(Errc::kCorruption, "unexpected metadata table " + std::to_string(table));
}

void ZstdEngine::FinishLoad() {
  std::lock_guard lock(mu_);
  ChunkedArray<uint32_t> derived(live_.size());
  usage_ = Usage{};
  ForEachEntry([&](uint64_t, uint64_t e) {
    Account(usage_, e, +1);
    if (IsFragment(e)) ++derived.At(Decode(e).bin);
  });
  for (uint64_t c = 0; c < live_.chunks(); ++c) {
    if (live_.ChunkData(c) == nullptr && derived.ChunkData(c) == nullptr) continue;
    const uint64_t first = c * ChunkedArray<uint32_t>::kChunk;
    const uint64_t n = std::min<uint64_t>(ChunkedArray<uint32_t>::kChunk, live_.size() - first);
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t b = static_cast<uint32_t>(first + i);
      const uint32_t stored = live_.Get(b), d = derived.Get(b);
      if (stored != d) stored_counts_[b] = stored;
      if (stored != d || d) live_.At(b) = d;
      if (d) alloc_.MarkUsed(b);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// State changes (under mu_)

void ZstdEngine::SetMap(uint64_t v, uint64_t entry) {
  uint64_t& e = map_.At(v);
  Account(usage_, e, -1);
  Account(usage_, entry, +1);
  e = entry;
  if (store_) {
    uint8_t b[8];
    StoreLE64(b, entry);
    store_->Set(kMapTable, v, b);
  }
}

void ZstdEngine::SetBinCount(uint32_t bin, uint32_t count) {
  live_.At(bin) = count;
  stored_counts_.erase(bin);
  if (store_) {
    uint8_t b[4];
    StoreLE32(b, count);
    store_->Set(kBinTable, bin, b);
  }
}

// ---------------------------------------------------------------------------------------------
// Writes

void ZstdEngine::Remap(uint64_t v, uint64_t entry) {
  std::lock_guard lock(mu_);
  const uint64_t old = map_.Get(v);
  if (IsFragment(entry)) {
    const uint32_t b = Decode(entry).bin;
    const uint32_t n = live_.Get(b);
    if (n == 0) reclaim_.Revived(b);
    SetBinCount(b, n + 1);
  }
  SetMap(v, entry);
  if (IsFragment(old)) {
    const uint32_t b = Decode(old).bin;
    const uint32_t n = live_.Get(b) - 1;
    SetBinCount(b, n);
    if (n == 0 && !open_.Contains(b)) reclaim_.Released(b);
  }
  if (store_) store_->EndGroup();
  locked_.Erase(v);
}

std::optional<uint32_t> ZstdEngine::AllocateBin(bool open) {
  std::lock_guard lock(mu_);
  std::optional<uint64_t> b = alloc_.Allocate();
  if (!b) return std::nullopt;
  if (open) open_.Insert(*b);
  return static_cast<uint32_t>(*b);
}

void ZstdEngine::CloseBin(uint32_t bin) {
  std::lock_guard lock(mu_);
  open_.Erase(bin);
  if (live_.Get(bin) == 0) reclaim_.Released(bin);
}

void ZstdEngine::FreeUnusedBin(uint32_t bin) {
  std::lock_guard lock(mu_);
  alloc_.Free(bin);
}

// ---------------------------------------------------------------------------------------------
// Accounting and checking

ZstdEngine::Usage ZstdEngine::usage() const {
  std::lock_guard lock(mu_);
  Usage u = usage_;
  u.allocated_bins = alloc_.used();
  return u;
}

ZstdEngine::Usage ZstdEngine::UsageOf(uint64_t first, uint64_t count) const {
  std::lock_guard lock(mu_);
  Usage u;
  std::vector<uint32_t> bins;  // of the fragments in the range
  for (uint64_t v = first; v < first + count && v < map_.size(); ++v) {
    const uint64_t e = map_.Get(v);
    Account(u, e, +1);
    if (IsFragment(e)) bins.push_back(Decode(e).bin);
  }
  std::sort(bins.begin(), bins.end());
  u.allocated_bins = static_cast<uint64_t>(std::unique(bins.begin(), bins.end()) - bins.begin());
  return u;
}

void ZstdEngine::Check(CheckMode mode, CheckResult* out) {
  std::lock_guard lock(mu_);
  // Fragments per bin, from the map.
  std::map<uint32_t, std::vector<std::pair<uint64_t, Fragment>>> by_bin;
  ForEachEntry([&](uint64_t v, uint64_t e) {
    if (IsFragment(e)) by_bin[Decode(e).bin].emplace_back(v, Decode(e));
  });
  for (auto& [bin, frags] : by_bin) {
    const std::string name = "zstd: bin " + std::to_string(bin);
    if (live_.Get(bin) != frags.size()) {
      out->Corruption(name + ": live count " + std::to_string(live_.Get(bin)) + " in memory but " +
                      Counted(frags.size(), "map entry uses", "map entries use") + " it");
    }
    if (!alloc_.IsUsed(bin)) out->Corruption(name + ": used by the map but free in the allocator");
    std::sort(frags.begin(), frags.end(),
              [](const auto& a, const auto& b) { return a.second.offset < b.second.offset; });
    for (size_t i = 0; i < frags.size(); ++i) {
      const Fragment& f = frags[i].second;
      if (f.raw() && frags.size() > 1) {
        out->Corruption(name + ": raw grain of virtual grain " + std::to_string(frags[i].first) +
                        " shares its bin with " + std::to_string(frags.size() - 1) +
                        " other fragment(s)");
        break;
      }
      if (i > 0) {
        const Fragment& p = frags[i - 1].second;
        if (p.offset + p.length > f.offset) {
          out->Corruption(name + ": fragments of virtual grains " +
                          std::to_string(frags[i - 1].first) + " and " +
                          std::to_string(frags[i].first) + " overlap at offset " +
                          std::to_string(f.offset) + " (doubly-used space)");
        }
      }
    }
  }
  for (uint64_t b = 0; b < alloc_.units(); ++b) {
    if (!alloc_.IsUsed(b) || by_bin.count(static_cast<uint32_t>(b)) ||
        open_.Contains(b) || reclaim_.pending(b)) {
      continue;
    }
    out->Leak("zstd: bin " + std::to_string(b) + ": allocated but unused (lost)");
    if (mode != CheckMode::kReadOnly) {
      alloc_.Free(b);
      ++out->repaired;
    }
  }
  std::vector<std::pair<uint32_t, uint32_t>> stored(stored_counts_.begin(), stored_counts_.end());
  std::sort(stored.begin(), stored.end());
  for (const auto& [b, s] : stored) {
    const uint32_t actual = live_.Get(b);
    const std::string msg = "zstd: bin " + std::to_string(b) + ": stored live count " +
                            std::to_string(s) + " but " +
                            Counted(actual, "map entry uses", "map entries use") + " it";
    if (s > actual) {
      out->Leak(msg);
    } else {
      out->Corruption(msg);
    }
    if (mode == CheckMode::kRepairAll || (mode == CheckMode::kRepairLeaks && s > actual)) {
      SetBinCount(b, actual);
      if (store_) store_->EndGroup();
      ++out->repaired;
    }
  }
}

std::vector<std::pair<uint64_t, ZstdEngine::Fragment>> ZstdEngine::Fragments() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<uint64_t, Fragment>> out;
  ForEachEntry([&](uint64_t v, uint64_t e) {
    if (IsFragment(e)) out.emplace_back(v, Decode(e));
  });
  return out;
}

}  // namespace vstack
