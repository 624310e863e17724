#include "blockdev/crc32c/dirty_regions.h"

namespace vstack {

uint64_t DirtyRegions::dirty_count() const {
  uint64_t n = 0;
  for (uint64_t r = 0; r < size(); ++r) n += dirty(r);
  return n;
}

void DirtyRegions::Touch(uint64_t r0, uint64_t r1, std::vector<uint64_t>* to_mark) {
  const uint64_t epoch = epoch_.load(std::memory_order_relaxed);
  for (uint64_t r = r0; r <= r1; ++r) {
    const uint64_t s = state_[r].fetch_add(kOneWrite, std::memory_order_acq_rel);
    if (last_epoch_.Load(r, std::memory_order_relaxed) != epoch) {
      last_epoch_.Store(r, epoch, std::memory_order_relaxed);
    }
    if (!(s & kDirty)) to_mark->push_back(r);
  }
}

void DirtyRegions::Untouch(uint64_t r0, uint64_t r1) {
  for (uint64_t r = r0; r <= r1; ++r) state_[r].fetch_sub(kOneWrite, std::memory_order_acq_rel);
}

void DirtyRegions::Marked(const std::vector<uint64_t>& regions) {
  for (uint64_t r : regions) state_[r].fetch_or(kDirty, std::memory_order_acq_rel);
}

std::vector<uint64_t> DirtyRegions::PickClean(bool all) {
  const uint64_t ended = epoch_.fetch_add(1, std::memory_order_relaxed);
  std::vector<uint64_t> out;
  for (uint64_t r = 0; r < size(); ++r) {
    uint64_t s = state_.Load(r);
    if (s != kDirty) continue;  // clean, or a write in flight
    if (!all && last_epoch_.Load(r, std::memory_order_relaxed) >= ended) continue;
    if (state_[r].compare_exchange_strong(s, 0, std::memory_order_acq_rel)) out.push_back(r);
  }
  return out;
}

}  // namespace vstack
