#include "analysis/space/space_fingerprint_set.h"

#include <utility>

namespace vstack {
namespace {

constexpr size_t kFirstSlots = 1024;

bool Empty(const Fingerprint& fp) { return fp.lo == 0 && fp.hi == 0; }

}  // namespace

bool FingerprintSet::Insert(const Fingerprint& fp) {
  Shard& s = shards_[fp.hi % shards_.size()];
  std::lock_guard lock(s.mu);
  return s.Insert(fp);
}

uint64_t FingerprintSet::size() const {
  uint64_t n = 0;
  for (const Shard& s : shards_) n += s.count + (s.has_zero ? 1 : 0);
  return n;
}

bool FingerprintSet::Shard::Insert(const Fingerprint& fp) {
  if (Empty(fp)) return !std::exchange(has_zero, true);
  if ((count + 1) * 2 > slots.size()) Grow();
  const size_t mask = slots.size() - 1;
  for (size_t i = fp.lo & mask;; i = (i + 1) & mask) {
    if (slots[i] == fp) return false;
    if (Empty(slots[i])) {
      slots[i] = fp;
      ++count;
      return true;
    }
  }
}

void FingerprintSet::Shard::Grow() {
  std::vector<Fingerprint> old(slots.empty() ? kFirstSlots : slots.size() * 2);
  old.swap(slots);
  count = 0;
  for (const Fingerprint& fp : old) {
    if (!Empty(fp)) Insert(fp);
  }
}

}  // namespace vstack
