#include "blockdev/metastore/bitmap_allocator.h"

#include <cassert>

namespace vstack {

BitmapAllocator::BitmapAllocator(uint64_t units) : units_(units), words_((units + 63) / 64, 0) {
  // Bits past the end are permanently "used" so searches never return them.
  if (units % 64) words_.back() = ~uint64_t{0} << (units % 64);
}

std::optional<uint64_t> BitmapAllocator::FindFree() const {
  if (used_ == units_) return std::nullopt;
  const uint64_t nwords = words_.size();
  uint64_t w = cursor_ / 64;
  // The cursor's own word, from the cursor bit on.
  uint64_t bits = words_[w] | ((uint64_t{1} << (cursor_ % 64)) - 1);
  for (uint64_t scanned = 0; scanned <= nwords; ++scanned) {
    if (bits != ~uint64_t{0}) return w * 64 + static_cast<uint64_t>(__builtin_ctzll(~bits));
    w = (w + 1 == nwords) ? 0 : w + 1;
    bits = words_[w];
  }
  return std::nullopt;
}

std::optional<uint64_t> BitmapAllocator::Allocate() {
  uint64_t n;
  return AllocateRun(1, &n);
}

std::optional<uint64_t> BitmapAllocator::AllocateRun(uint64_t max, uint64_t* count) {
  std::optional<uint64_t> first = FindFree();
  if (!first) return std::nullopt;
  uint64_t n = 0;
  while (n < max && *first + n < units_ && !IsUsed(*first + n)) {
    MarkUsed(*first + n);
    ++n;
  }
  *count = n;
  cursor_ = *first + n == units_ ? 0 : *first + n;
  return first;
}

void BitmapAllocator::MarkUsed(uint64_t unit) {
  assert(unit < units_ && !IsUsed(unit));
  words_[unit / 64] |= uint64_t{1} << (unit % 64);
  ++used_;
}

void BitmapAllocator::Free(uint64_t unit) {
  assert(unit < units_ && IsUsed(unit));
  words_[unit / 64] &= ~(uint64_t{1} << (unit % 64));
  --used_;
}

}  // namespace vstack
