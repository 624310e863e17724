#include "blockdev/dedup/dedup_index.h"

#include <algorithm>

namespace vstack {
namespace {

constexpr uint64_t kMaxLoadPercent = 70;  // grown by half beyond it

}  // namespace

DedupIndex::DedupIndex(uint64_t units) : fps_(2 * units), shards_(size_t{1} << kShardBits) {
  // Sized up front for an eighth of the units (grown by half when needed).
  const size_t slots = std::max<uint64_t>(256, units >> (kShardBits + 3));
  for (Shard& s : shards_) {
    s.tags.assign(slots, 0);
    s.slots.assign(slots, 0);
  }
}

std::optional<DedupIndex::Hit> DedupIndex::Find(const Fingerprint& fp) const {
  const Shard& s = shards_[ShardOf(fp)];
  const uint8_t tag = TagOf(fp);
  const uint64_t n = s.slots.size();
  for (uint64_t i = SlotOf(s, fp);; i = i + 1 == n ? 0 : i + 1) {
    if (s.tags[i] == 0) return std::nullopt;
    if (s.tags[i] == tag && Of(s.slots[i]) == fp) {
      const uint64_t* owner = s.owners.Find(s.slots[i]);
      return Hit{s.slots[i], owner ? *owner : 0};
    }
  }
}

void DedupIndex::Insert(const Fingerprint& fp, uint64_t unit, uint64_t owner) {
  Shard& s = shards_[ShardOf(fp)];
  if ((s.entries + 1) * 100 > s.slots.size() * kMaxLoadPercent) Rehash(s, s.slots.size() * 3 / 2);
  const uint64_t n = s.slots.size();
  uint64_t i = SlotOf(s, fp);
  while (s.tags[i] != 0) i = i + 1 == n ? 0 : i + 1;
  s.tags[i] = TagOf(fp);
  s.slots[i] = static_cast<uint32_t>(unit);
  ++s.entries;
  if (owner) s.owners[unit] = owner;
}

void DedupIndex::Ready(uint64_t unit) { shards_[ShardOf(Of(unit))].owners.Erase(unit); }

void DedupIndex::Erase(uint64_t unit) {
  const Fingerprint fp = Of(unit);
  Shard& s = shards_[ShardOf(fp)];
  s.owners.Erase(unit);
  const uint8_t tag = TagOf(fp);
  const uint64_t n = s.slots.size();
  uint64_t hole = SlotOf(s, fp);
  for (;; hole = hole + 1 == n ? 0 : hole + 1) {
    if (s.tags[hole] == 0) return;  // not indexed (a duplicate kept after a collision)
    if (s.tags[hole] == tag && s.slots[hole] == unit) break;
  }
  // Backward-shift deletion (no tombstones): each later entry of the cluster moves into the
  // hole unless its home slot lies cyclically in (hole, j].
  for (uint64_t j = hole + 1 == n ? 0 : hole + 1; s.tags[j] != 0; j = j + 1 == n ? 0 : j + 1) {
    const uint64_t home = SlotOf(s, Of(s.slots[j]));
    const bool stays = hole <= j ? home > hole && home <= j : home > hole || home <= j;
    if (stays) continue;
    s.tags[hole] = s.tags[j];
    s.slots[hole] = s.slots[j];
    hole = j;
  }
  s.tags[hole] = 0;
  --s.entries;
}

void DedupIndex::Rehash(Shard& s, size_t slots) {
  std::vector<uint8_t> tags(slots, 0);
  std::vector<uint32_t> units(slots, 0);
  tags.swap(s.tags);
  units.swap(s.slots);
  for (uint64_t i = 0; i < units.size(); ++i) {
    if (tags[i] == 0) continue;
    uint64_t j = SlotOf(s, Of(units[i]));
    while (s.tags[j] != 0) j = j + 1 == slots ? 0 : j + 1;
    s.tags[j] = tags[i];
    s.slots[j] = units[i];
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
  uint64_t n = fps_.bytes();
  for (const Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    n += s.tags.capacity() + s.slots.capacity() * sizeof(uint32_t);
  }
  return n;
}

}  // namespace vstack
