#include "blockdev/crc32c/checksum_table.h"

#include <vector>

#include "blockdev/metastore/crc32c.h"

namespace vstack {
namespace {

uint32_t ZeroGrainCrc(uint32_t grain) {
  std::vector<unsigned char> zeros(grain, 0);
  return Crc32c(zeros.data(), zeros.size());
}

}  // namespace

ChecksumTable::ChecksumTable(uint64_t grains, uint32_t grain, uint32_t grains_per_region)
    : per_region_(grains_per_region),
      zero_crc_(ZeroGrainCrc(grain)),
      crc_(grains),
      regions_((grains + grains_per_region - 1) / grains_per_region) {}

bool ChecksumTable::Matches(uint64_t g, uint32_t crc) const {
  std::lock_guard lock(mu_);
  if (crc_.Get(g) == Stored(crc)) return true;
  const uint32_t* pending = pending_.Find(g);
  return pending != nullptr && *pending == crc;
}

void ChecksumTable::TouchRegions(uint64_t first_grain, uint64_t last_grain,
                                 std::vector<uint64_t>* to_mark) {
  std::lock_guard lock(mu_);
  for (uint64_t r = first_grain / per_region_; r <= last_grain / per_region_; ++r) {
    Region& reg = regions_[r];
    ++reg.in_flight;
    reg.last_epoch = epoch_;
    if (!reg.durable_dirty) to_mark->push_back(r);
  }
}

void ChecksumTable::UntouchRegions(uint64_t first_grain, uint64_t last_grain) {
  std::lock_guard lock(mu_);
  for (uint64_t r = first_grain / per_region_; r <= last_grain / per_region_; ++r) {
    --regions_[r].in_flight;
  }
}

void ChecksumTable::Marked(const std::vector<uint64_t>& regions) {
  std::lock_guard lock(mu_);
  for (uint64_t r : regions) regions_[r].durable_dirty = true;
}

bool ChecksumTable::NeedsMark(uint64_t r) const {
  std::lock_guard lock(mu_);
  return !regions_[r].durable_dirty;
}

bool ChecksumTable::Lock(uint64_t g) {
  std::lock_guard lock(mu_);
  return locked_.Insert(g);
}

void ChecksumTable::Unlock(uint64_t g) {
  std::lock_guard lock(mu_);
  locked_.Erase(g);
}

void ChecksumTable::AddPending(uint64_t g, uint32_t crc) {
  std::lock_guard lock(mu_);
  pending_[g] = crc;
}

void ChecksumTable::Finish(uint64_t g, uint32_t crc, bool ok) {
  std::lock_guard lock(mu_);
  pending_.Erase(g);
  if (ok) crc_.At(g) = Stored(crc);
}

std::vector<ChecksumTable::Clean> ChecksumTable::PickClean(bool all) {
  std::lock_guard lock(mu_);
  std::vector<Clean> out;
  for (uint64_t r = 0; r < regions_.size(); ++r) {
    Region& reg = regions_[r];
    if (!reg.durable_dirty || reg.in_flight > 0) continue;
    if (!all && reg.last_epoch >= epoch_) continue;  // written in this flush interval
    reg.durable_dirty = false;
    Clean c{r, {}};
    const uint64_t first = r * per_region_;
    for (uint64_t g = first; g < first + per_region_ && g < crc_.size(); ++g) {
      c.stored.push_back(crc_.Get(g));
    }
    out.push_back(std::move(c));
  }
  ++epoch_;
  return out;
}

uint64_t ChecksumTable::zero_grains() const {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (uint64_t c = 0; c < crc_.chunks(); ++c) {
    const uint32_t* chunk = crc_.ChunkData(c);
    const uint64_t first = c * ChunkedArray<uint32_t>::kChunk;
    const uint64_t len = std::min<uint64_t>(ChunkedArray<uint32_t>::kChunk, crc_.size() - first);
    if (chunk == nullptr) {
      n += len;
      continue;
    }
    for (uint64_t i = 0; i < len; ++i) n += chunk[i] == 0;
  }
  return n;
}

uint64_t ChecksumTable::dirty_regions() const {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const Region& r : regions_) n += r.durable_dirty;
  return n;
}

uint32_t ChecksumTable::crc(uint64_t g) const {
  std::lock_guard lock(mu_);
  return crc_.Get(g) ^ zero_crc_;
}

void ChecksumTable::Set(uint64_t g, uint32_t crc) {
  std::lock_guard lock(mu_);
  crc_.At(g) = Stored(crc);
}

}  // namespace vstack
