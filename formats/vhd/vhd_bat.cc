#include "formats/vhd/vhd_bat.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "lib/endian.h"

namespace vstack::vhd {

Bat::Bat(const std::vector<uint32_t>& entries)
    : size_(static_cast<uint32_t>(entries.size())),
      entries_(std::make_unique<std::atomic<uint32_t>[]>(entries.size())),
      flags_(std::make_unique<std::atomic<uint8_t>[]>(entries.size())) {
  for (uint32_t i = 0; i < size_; ++i) {
    entries_[i].store(entries[i], std::memory_order_relaxed);
    flags_[i].store(0, std::memory_order_relaxed);
  }
}

void Bat::Publish(uint32_t block, uint32_t entry, uint8_t flags) {
  flags_[block].store(flags, std::memory_order_release);
  entries_[block].store(entry, std::memory_order_release);
}

uint32_t Bat::CountAllocated() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < size_; ++i) n += entry(i) != kUnallocated ? 1 : 0;
  return n;
}

std::vector<uint32_t> Bat::Snapshot() const {
  std::vector<uint32_t> out(size_);
  for (uint32_t i = 0; i < size_; ++i) out[i] = entry(i);
  return out;
}

namespace {

// `entries` (at most kEntriesPerBatSector) as one BAT sector.
void EncodeBatSector(std::span<const uint32_t> entries, std::span<uint8_t, kSectorSize> out) {
  std::memset(out.data(), 0xFF, kSectorSize);
  for (size_t k = 0; k < entries.size(); ++k) StoreBE32(out.data() + 4 * k, entries[k]);
}

}  // namespace

void Bat::SerializeSector(uint64_t sector, std::span<uint8_t, kSectorSize> out) const {
  std::array<uint32_t, kEntriesPerBatSector> local{};
  const uint64_t first = sector * kEntriesPerBatSector;
  size_t n = 0;
  for (; n < kEntriesPerBatSector && first + n < size_; ++n) {
    local[n] = entry(static_cast<uint32_t>(first + n));
  }
  EncodeBatSector(std::span<const uint32_t>(local.data(), n), out);
}

void SerializeBatSector(std::span<const uint32_t> entries, uint64_t sector,
                        std::span<uint8_t, kSectorSize> out) {
  const uint64_t first = std::min<uint64_t>(sector * kEntriesPerBatSector, entries.size());
  EncodeBatSector(
      entries.subspan(first, std::min<uint64_t>(kEntriesPerBatSector, entries.size() - first)),
      out);
}

void DecodeBat(std::span<const uint8_t> bytes, std::vector<uint32_t>* out) {
  for (size_t i = 0; i + 4 <= bytes.size(); i += 4) out->push_back(LoadBE32(bytes.data() + i));
}

}  // namespace vstack::vhd
