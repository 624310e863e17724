#include "blockdev/metastore/bitmap_allocator.h"

#include <algorithm>
#include <cassert>

namespace vstack {

BitmapAllocator::BitmapAllocator(uint64_t units)
    : units_(units),
      used_words_((units + 63) / 64),
      stale_words_((units + 63) / 64),
      mark_words_((units + 63) / 64) {
  // Bits past the end are permanently "used" so searches never return them.
  if (units % 64) used_words_[units / 64] = ~uint64_t{0} << (units % 64);
}

std::optional<uint64_t> BitmapAllocator::FindFree() const {
  if (used_ == units_) return std::nullopt;
  const uint64_t nwords = used_words_.size();
  uint64_t w = cursor_ / 64;
  // The cursor's own word, from the cursor bit on.
  uint64_t bits = used_words_[w] | ((uint64_t{1} << (cursor_ % 64)) - 1);
  for (uint64_t scanned = 0; scanned <= nwords; ++scanned) {
    if (bits != ~uint64_t{0}) return w * 64 + static_cast<uint64_t>(__builtin_ctzll(~bits));
    w = (w + 1 == nwords) ? 0 : w + 1;
    bits = used_words_[w];
  }
  return std::nullopt;
}

std::optional<uint64_t> BitmapAllocator::PopStale() {
  while (stale_ > 0 && !reuse_.empty()) {
    const uint64_t u = reuse_.back();
    reuse_.pop_back();
    if (IsStale(u)) return u;
  }
  return std::nullopt;
}

std::optional<uint64_t> BitmapAllocator::FindFreeRun(uint64_t want) const {
  constexpr uint64_t kMaxScan = uint64_t{1} << 18;  // units looked at before giving up
  uint64_t at = cursor_;
  for (uint64_t scanned = 0; scanned < std::min(kMaxScan, units_);) {
    if (at >= units_) at = 0;
    if (IsUsed(at)) {
      ++at;
      ++scanned;
      continue;
    }
    uint64_t n = 0;
    while (n < want && at + n < units_ && !IsUsed(at + n)) ++n;
    if (n == want) return at;
    at += n;
    scanned += n;
  }
  return std::nullopt;
}

uint64_t BitmapAllocator::TakeRun(uint64_t first, uint64_t max) {
  uint64_t n = 0;
  for (; n < max && first + n < units_ && !IsUsed(first + n); ++n) MarkUsed(first + n);
  return n;
}

std::optional<uint64_t> BitmapAllocator::Allocate() {
  uint64_t n;
  return AllocateRun(1, 1, &n);
}

std::optional<uint64_t> BitmapAllocator::AllocateRun(uint64_t want, uint64_t max,
                                                     uint64_t* count) {
  want = std::clamp<uint64_t>(want, 1, max);
  // The free run around a stale unit, from as far back as `max` allows: [first, end).
  auto run_around = [&](uint64_t u, uint64_t* end) {
    uint64_t first = u;
    while (first > 0 && u - first + 1 < max && !IsUsed(first - 1)) --first;
    *end = u + 1;
    while (*end < units_ && *end - first < max && !IsUsed(*end)) ++*end;
    return first;
  };
  // The most recently freed stale units first; one in a run too short for `want` is passed
  // over (it stays stale, first in line, for a shorter request), up to kStaleTries of them.
  constexpr int kStaleTries = 8;
  uint64_t passed[kStaleTries];
  int npassed = 0;
  std::optional<uint64_t> found;
  uint64_t end = 0;
  while (npassed < kStaleTries) {
    const std::optional<uint64_t> u = PopStale();
    if (!u) break;
    const uint64_t first = run_around(*u, &end);
    if (end - first >= want) {
      found = first;
      break;
    }
    passed[npassed++] = *u;
  }
  for (int i = npassed; i-- > 0;) reuse_.push_back(passed[i]);  // back in their order
  if (found) {
    *count = TakeRun(*found, end - *found);
    return found;
  }
  std::optional<uint64_t> first = FindFreeRun(want);
  if (!first && npassed > 0) {  // no clean run holds `want`: the first stale run after all
    first = run_around(passed[0], &end);
    *count = TakeRun(*first, end - *first);
    return first;
  }
  if (!first) first = FindFree();
  if (!first) return std::nullopt;
  *count = TakeRun(*first, max);
  cursor_ = *first + *count == units_ ? 0 : *first + *count;
  return first;
}

void BitmapAllocator::ClearStale(uint64_t unit) {
  Clear(stale_words_, unit);
  --stale_;
}

void BitmapAllocator::MarkUsed(uint64_t unit) {
  assert(unit < units_ && !IsUsed(unit));
  if (IsStale(unit)) ClearStale(unit);
  Set(used_words_, unit);
  ++used_;
}

void BitmapAllocator::Free(uint64_t unit) {
  assert(unit < units_ && IsUsed(unit));
  Clear(used_words_, unit);
  --used_;
  Set(stale_words_, unit);
  ++stale_;
  reuse_.push_back(unit);
  freed_this_round_.push_back(unit);
  if (reuse_.size() > 2 * stale_ + 1024) CompactReuse();
}

void BitmapAllocator::CompactReuse() {
  // Mostly entries of units reused since (taken with a run around another): each stale unit is
  // kept once, at its most recent place, so the most recently freed stay on top. Linear, with
  // the scratch marks (a sort here cost a thin layer 4% of its CPU with two queues).
  size_t kept = reuse_.size();
  for (size_t i = reuse_.size(); i-- > 0;) {
    const uint64_t u = reuse_[i];
    if (!IsStale(u) || Bit(mark_words_, u)) continue;
    Set(mark_words_, u);
    reuse_[--kept] = u;
  }
  reuse_.erase(reuse_.begin(), reuse_.begin() + static_cast<std::ptrdiff_t>(kept));
  for (uint64_t u : reuse_) Clear(mark_words_, u);
}

void BitmapAllocator::Take(const std::vector<uint64_t>& candidates, std::vector<uint64_t>* out,
                           uint64_t min_run) {
  // The stale candidates are marked in a bitmap (a duplicate marks the same bit), and each run
  // of marked units is walked from its first unit, which is a candidate too: linear in the
  // candidates, where sorting them (a commit's tens of thousands of freed units) cost a few
  // percent of a thin layer's CPU. Only what is taken is sorted.
  auto marked = [&](uint64_t u) { return Bit(mark_words_, u); };
  for (uint64_t u : candidates) {
    if (IsStale(u)) Set(mark_words_, u);
  }
  const size_t begin = out->size();
  for (uint64_t u : candidates) {
    if (!marked(u) || (u > 0 && marked(u - 1))) continue;  // not the first of a run
    uint64_t end = u;
    for (; end < units_ && marked(end); ++end) Clear(mark_words_, end);
    if (end - u < min_run) continue;
    for (uint64_t k = u; k < end; ++k) {
      MarkUsed(k);  // clears its stale bit; its entry in reuse_ is skipped now
      out->push_back(k);
    }
  }
  std::sort(out->begin() + static_cast<std::ptrdiff_t>(begin), out->end());
}

void BitmapAllocator::TakeAged(std::vector<uint64_t>* out, uint64_t keep, uint64_t min_run) {
  std::vector<uint64_t> aged;
  aged.swap(freed_last_round_);
  freed_last_round_.swap(freed_this_round_);
  if (out == nullptr) return;
  if (stale_ > keep) {
    Take(aged, out, min_run);
    return;
  }
  // A small pool stays for reuse; its units remain candidates (each once).
  std::erase_if(aged, [&](uint64_t u) { return !IsStale(u); });
  std::sort(aged.begin(), aged.end());
  aged.erase(std::unique(aged.begin(), aged.end()), aged.end());
  freed_last_round_.insert(freed_last_round_.end(), aged.begin(), aged.end());
}

void BitmapAllocator::TakeStale(std::vector<uint64_t>* out) {
  Take(reuse_, out);
  reuse_.clear();
  freed_this_round_.clear();
  freed_last_round_.clear();
}

void BitmapAllocator::FreeDiscarded(const std::vector<uint64_t>& units) {
  for (uint64_t u : units) {
    assert(u < units_ && IsUsed(u));
    Clear(used_words_, u);
    --used_;
  }
}

uint64_t BitmapAllocator::memory_bytes() const {
  return used_words_.resident_bytes() + stale_words_.resident_bytes() +
         mark_words_.resident_bytes() +
         (reuse_.capacity() + freed_this_round_.capacity() + freed_last_round_.capacity()) *
             sizeof(uint64_t);
}

}  // namespace vstack
