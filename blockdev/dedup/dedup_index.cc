#include "blockdev/dedup/dedup_index.h"

#include <algorithm>

namespace vstack {
namespace {

constexpr uint64_t kMaxLoadPercent = 80;

}  // namespace

DedupIndex::DedupIndex(uint64_t units, uint64_t max_entries)
    : fps_(2 * units), owners_(units), shards_(size_t{1} << kShardBits) {
  // Sized up front for an eighth of what it may hold (grown by half when needed).
  const size_t slots = std::max<uint64_t>(256, std::min(units, max_entries) >> (kShardBits + 3));
  for (Shard& s : shards_) s.slots.assign(slots, Slot{0, 0});
}

std::optional<DedupIndex::Hit> DedupIndex::Find(const Fingerprint& fp) const {
  const Shard& s = shards_[ShardOf(fp)];
  const uint8_t tag = TagOf(fp);
  const uint64_t n = s.slots.size();
  for (uint64_t i = SlotOf(s, fp);; i = i + 1 == n ? 0 : i + 1) {
    const Slot slot = s.slots[i];
    if (slot.tag == 0) return std::nullopt;
    if (slot.tag == tag && Of(slot.unit) == fp) {
      return Hit{slot.unit, owners_.Load(slot.unit)};
    }
  }
}

void DedupIndex::Insert(const Fingerprint& fp, uint64_t unit, uint64_t owner) {
  Shard& s = shards_[ShardOf(fp)];
  if ((s.entries + s.tombstones + 1) * 100 > s.slots.size() * kMaxLoadPercent) {
    const bool grow = (s.entries + 1) * 100 > s.slots.size() * 60;  // else purge tombstones
    Rehash(s, grow ? s.slots.size() * 3 / 2 : s.slots.size());
  }
  const uint64_t n = s.slots.size();
  uint64_t i = SlotOf(s, fp);
  while (s.slots[i].tag != 0 && s.slots[i].tag != kTombstone) i = i + 1 == n ? 0 : i + 1;
  if (s.slots[i].tag == kTombstone) --s.tombstones;
  s.slots[i] = Slot{static_cast<uint32_t>(unit), TagOf(fp)};
  ++s.entries;
  if (owner) owners_.Store(unit, owner);  // (a load inserts with 0: no page of owners_ taken)
}

void DedupIndex::Erase(uint64_t unit) {
  const Fingerprint fp = Of(unit);
  Shard& s = shards_[ShardOf(fp)];
  if (owners_.Load(unit)) owners_.Store(unit, 0);
  const uint8_t tag = TagOf(fp);
  const uint64_t n = s.slots.size();
  for (uint64_t i = SlotOf(s, fp);; i = i + 1 == n ? 0 : i + 1) {
    if (s.slots[i].tag == 0) return;  // not indexed (a duplicate kept after a collision)
    if (s.slots[i].tag == tag && s.slots[i].unit == unit) {
      s.slots[i].tag = kTombstone;
      --s.entries;
      ++s.tombstones;
      return;
    }
  }
}

void DedupIndex::Rehash(Shard& s, size_t slots) {
  std::vector<Slot> old(slots, Slot{0, 0});
  old.swap(s.slots);
  s.tombstones = 0;
  for (const Slot& slot : old) {
    if (slot.tag == 0 || slot.tag == kTombstone) continue;
    uint64_t j = SlotOf(s, Of(slot.unit));
    while (s.slots[j].tag != 0) j = j + 1 == slots ? 0 : j + 1;
    s.slots[j] = slot;
  }
}

uint64_t DedupIndex::entries() const {
  uint64_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    n += s.entries;
  }
  return n;
}

uint64_t DedupIndex::memory_bytes() const {
  uint64_t n = fps_.resident_bytes() + owners_.resident_bytes();
  for (const Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    n += s.slots.capacity() * sizeof(Slot);
  }
  return n;
}

}  // namespace vstack
