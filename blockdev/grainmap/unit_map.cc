#include "blockdev/grainmap/unit_map.h"

#include <algorithm>
#include <cassert>
#include <thread>

#include "lib/plural.h"

namespace vstack {
namespace {

constexpr uint64_t kReserveUnits = 64;  // a queue's reserve when free space allows

// The bits of word w that grains [first, first+count) cover.
uint64_t WordMask(uint64_t w, uint64_t first, uint64_t count) {
  const uint64_t lo = std::max(first, w * 64), hi = std::min(first + count, w * 64 + 64);
  const uint64_t n = hi - lo;
  return (n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1)) << (lo % 64);
}

void SortUnique(std::vector<uint64_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

UnitMap::UnitMap(uint64_t grains, uint32_t entry_bytes, uint64_t units)
    : grains_(grains),
      units_(units),
      entry_bytes_(entry_bytes),
      wide_(entry_bytes == 8),
      map32_(wide_ ? 0 : grains),
      map64_(wide_ ? grains : 0),
      written_((grains + kBlockGrains - 1) / kBlockGrains),
      loaded_units_((units + kBlockGrains - 1) / kBlockGrains),
      locks_((grains + 63) / 64),
      dirty_(units ? grains : 0),
      refs_(units),
      released_in_(units),
      alloc_(units),
      free_hint_(units) {}

UnitMap::~UnitMap() = default;

uint64_t UnitMap::NextWritten(uint64_t v) const {
  if (v >= grains_) return grains_;
  const uint64_t blocks = (grains_ + kBlockGrains - 1) / kBlockGrains;
  const uint64_t block = written_.NextSet(v / kBlockGrains, blocks);
  return block == blocks ? grains_ : std::max(v, block * kBlockGrains);
}

uint64_t UnitMap::NextLoadedUnit(uint64_t u) const {
  if (u >= units_) return units_;
  const uint64_t blocks = (units_ + kBlockGrains - 1) / kBlockGrains;
  const uint64_t block = loaded_units_.NextSet(u / kBlockGrains, blocks);
  return block == blocks ? units_ : std::max(u, block * kBlockGrains);
}

uint64_t UnitMap::Enter(Journal& j) {
  for (;;) {
    const uint64_t g = gen_.load(std::memory_order_seq_cst);
    j.readers[g & 1].fetch_add(1, std::memory_order_seq_cst);
    if (gen_.load(std::memory_order_seq_cst) == g) return g;
    Leave(j, g);  // the generation moved on meanwhile: enter the new one
  }
}

bool UnitMap::Drained(uint64_t parity) const {
  for (const auto& j : journals_) {
    if (j->readers[parity & 1].load(std::memory_order_seq_cst) != 0) return false;
  }
  return true;
}

bool UnitMap::TryLock(uint64_t first, uint64_t count) {
  const uint64_t w0 = first / 64, w1 = (first + count - 1) / 64;
  for (uint64_t w = w0; w <= w1; ++w) {
    const uint64_t mask = WordMask(w, first, count);
    uint64_t word = locks_.Load(w, std::memory_order_relaxed);
    do {
      if (word & mask) {
        if (w > w0) Unlock(first, w * 64 - first);
        return false;
      }
    } while (!locks_[w].compare_exchange_weak(word, word | mask, std::memory_order_acquire,
                                              std::memory_order_relaxed));
  }
  return true;
}

void UnitMap::Unlock(uint64_t first, uint64_t count) {
  for (uint64_t w = first / 64; w <= (first + count - 1) / 64; ++w) {
    locks_[w].fetch_and(~WordMask(w, first, count), std::memory_order_release);
  }
}

// ---------------------------------------------------------------------------------------------
// Journals and changes

UnitMap::Journal* UnitMap::Attach() {
  std::lock_guard lock(journals_mu_);
  journals_.push_back(std::make_unique<Journal>());
  return journals_.back().get();
}

void UnitMap::Detach(Journal* j) {
  std::lock_guard lock(journals_mu_);
  {
    std::lock_guard jl(j->mu);
    j->closed = true;
    std::lock_guard al(alloc_mu_);
    GiveBackReserve(*j);
    NoteFree();
    // With records left, it waits for the next commit's capture, which drops it. Without (a
    // queue that only read, or whose records a commit took), it goes now: a device that many
    // short-lived threads use kept a journal per thread until its next commit, or for ever
    // when nothing was written.
    if (!j->grains.empty() || !j->stored.empty() || !j->released.empty() || !j->held.empty() ||
        j->readers[0].load() != 0 || j->readers[1].load() != 0) {
      return;
    }
    base_.live += j->live;
    base_.zeros += j->zeros;
    base_.used += j->used;
  }
  std::erase_if(journals_, [&](const std::unique_ptr<Journal>& p) { return p.get() == j; });
}

void UnitMap::GiveBackReserve(Journal& j) {  // REQUIRES alloc_mu_
  j.ForEachReservedRun([&](uint64_t first, uint64_t end) {
    for (uint64_t u = first; u < end; ++u) alloc_.Free(u);  // stale, as they may have been
  });
  j.next = j.end.load();
  j.spares = 0;
}

uint64_t UnitMap::Journal::reserved() const {
  uint64_t n = 0;
  ForEachReservedRun([&](uint64_t first, uint64_t end) { n += end - first; });
  return n;
}

void UnitMap::Remap(Journal& j, uint64_t v, uint64_t e, bool counted) {
  if (HasUnit(e) && !counted && units_) AddRef(j, UnitOf(e));
  const uint64_t old = Exchange(v, e);
  if (HasUnit(old) && units_) DropRef(j, UnitOf(old));
  auto bump = [](std::atomic<int64_t>& c, int64_t d) {
    c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
  };
  bump(j.live, (e != kUnmapped) - (old != kUnmapped));
  bump(j.zeros, (e == kZero) - (old == kZero));
  // Journaled once per commit interval: the bit says it is on a journal's list already.
  if (units_ && !dirty_.Set(v, std::memory_order_relaxed)) {
    j.grains.push_back(v);
  }
}

void UnitMap::AddRef(Journal& j, uint64_t unit) {
  if (refs_[unit].fetch_add(1, std::memory_order_relaxed) == 0) {
    j.used.store(j.used.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
}

void UnitMap::DropRef(Journal& j, uint64_t unit) {
  if (refs_[unit].fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  j.used.store(j.used.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  released_in_.Store(unit, epoch_.load(std::memory_order_relaxed));
  j.released.push_back(unit);
}

void UnitMap::Hold(Journal& j, uint64_t unit) {
  AddRef(j, unit);
  ++*j.held.Insert(unit).first;
}

void UnitMap::Unhold(Journal& j, uint64_t unit) {
  if (--*j.held.Find(unit) == 0) j.held.Erase(unit);
  DropRef(j, unit);
}

void UnitMap::CancelRef(Journal& j, uint64_t unit) {
  if (refs_[unit].fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  j.used.store(j.used.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// Allocation

void UnitMap::Reserve(Journal& j, uint64_t n) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  const uint64_t next = j.next.load(kRelaxed), end = j.end.load(kRelaxed);
  if (end - next >= n) return;
  for (uint32_t i = j.spares.load(kRelaxed); i-- > 0;) {  // a spare run long enough
    const uint64_t first = j.spare_first[i].load(kRelaxed), last = j.spare_end[i].load(kRelaxed);
    if (last - first < n) continue;
    if (next == end) {  // the current run is used up: the spare takes its place
      const uint32_t back = j.spares.load(kRelaxed) - 1;
      j.spare_first[i].store(j.spare_first[back].load(kRelaxed), kRelaxed);
      j.spare_end[i].store(j.spare_end[back].load(kRelaxed), kRelaxed);
      j.spares.store(back, kRelaxed);
    } else {  // swapped: what is left of the current run may serve a shorter write
      j.spare_first[i].store(next, kRelaxed);
      j.spare_end[i].store(end, kRelaxed);
    }
    j.end.store(last, kRelaxed);
    j.next.store(first, kRelaxed);
    return;
  }
  std::unique_lock lock(alloc_mu_);
  refills_.fetch_add(1, std::memory_order_relaxed);
  GiveBackReserve(j);  // too short for this write
  // Runs until the reserve holds kReserveUnits (at most an eighth of the free units), the first
  // one at least n long where the free space allows.
  const uint64_t want = std::max(n, std::min(kReserveUnits, alloc_.free() / 8));
  if (FillReserve(j, n, want) < n) {
    // Short of free units: other queues' reserves may hold them. (The lock order is
    // journals_mu_, then alloc_mu_.)
    lock.unlock();
    const bool more = TakeBackIdleReserves(j);
    lock.lock();
    if (more) {
      GiveBackReserve(j);
      FillReserve(j, n, std::max(n, std::min(kReserveUnits, alloc_.free() / 8)));
    }
  }
  NoteFree();
}

uint64_t UnitMap::FillReserve(Journal& j, uint64_t n, uint64_t want) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  uint64_t taken = 0;
  for (uint32_t runs = 0; taken < want && runs <= Journal::kSpareRuns; ++runs) {
    uint64_t count = 0;
    // (Each run up to `want` long, not to what is left of it: a run cut short would leave a
    // fragment too short for the next write, given back at the next refill as the most
    // recently freed unit, where it stands in the way of reusing the runs freed before it.)
    const std::optional<uint64_t> first = alloc_.AllocateRun(n, want, &count);
    if (!first) break;
    if (runs == 0) {
      j.end.store(*first + count, kRelaxed);
      j.next.store(*first, kRelaxed);
    } else {
      j.spare_first[runs - 1].store(*first, kRelaxed);
      j.spare_end[runs - 1].store(*first + count, kRelaxed);
      j.spares.store(runs, kRelaxed);
    }
    taken += count;
  }
  return taken;
}

bool UnitMap::TakeBackIdleReserves(const Journal& self) {
  // Only if the list is free: the caller may hold a dedup index shard, and a commit's capture
  // holds journals_mu_ and then each journal's mutex, which a queue undoing a write holds while
  // it takes that shard (a cycle ThreadSanitizer found). Busy means a commit is under way,
  // which frees units too: the caller's out-of-room path waits for it and tries again.
  std::unique_lock lock(journals_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  bool any = false;
  for (const auto& j : journals_) {
    if (j.get() == &self || j->closed || j->reserved() == 0) continue;
    j->steal.store(true, std::memory_order_seq_cst);
    if (!j->active.load(std::memory_order_seq_cst)) {  // idle, and it waits if it comes back
      std::lock_guard al(alloc_mu_);
      GiveBackReserve(*j);
      any = true;
    }
    j->steal.store(false, std::memory_order_release);
  }
  return any;
}

UnitMap::OwnerActivity::OwnerActivity(Journal& j) : j_(j) {
  if (j_.depth++ > 0) return;
  j_.active.store(true, std::memory_order_seq_cst);
  while (j_.steal.load(std::memory_order_seq_cst)) std::this_thread::yield();
}

UnitMap::OwnerActivity::~OwnerActivity() {
  if (--j_.depth == 0) j_.active.store(false, std::memory_order_release);
}

bool UnitMap::TakeUnit(Journal& j, uint64_t* unit) {
  uint64_t next = j.next.load(std::memory_order_relaxed);
  if (next == j.end.load(std::memory_order_relaxed)) {
    Reserve(j, 1);
    next = j.next.load(std::memory_order_relaxed);
    if (next == j.end.load(std::memory_order_relaxed)) return false;
  }
  *unit = next;
  j.next.store(next + 1, std::memory_order_relaxed);
  return true;
}

void UnitMap::GiveBack(uint64_t unit) {
  assert(refs_.Load(unit) == 0);  // a reference left would release it again: freed twice
  std::lock_guard lock(alloc_mu_);
  FreeUnit(unit);
  NoteFree();
}

void UnitMap::FreeUnit(uint64_t unit) {  // REQUIRES alloc_mu_
  if (!alloc_.IsUsed(unit)) {
    assert(false && "a grain layer frees a unit that is free");
    ++freed_twice_;  // Check reports it: the allocator stays consistent, the bug is not hidden
    return;
  }
  alloc_.Free(unit);
}

// ---------------------------------------------------------------------------------------------
// Commits

UnitMap::Capture UnitMap::TakeCapture() {
  Capture c;
  std::vector<uint64_t> grains;
  {
    std::lock_guard lock(journals_mu_);
    std::vector<std::unique_lock<std::mutex>> held;
    for (auto& j : journals_) held.emplace_back(j->mu);
    c.epoch = epoch_.fetch_add(1, std::memory_order_relaxed);
    for (auto [v, e] : carry_.grains) grains.push_back(v);
    const bool carry_grains = !carry_.grains.empty();
    c.stored = std::move(carry_.stored);
    c.released = std::move(carry_.released);
    carry_ = Capture{};
    for (auto& j : journals_) {
      grains.insert(grains.end(), j->grains.begin(), j->grains.end());
      c.stored.insert(c.stored.end(), j->stored.begin(), j->stored.end());
      c.released.insert(c.released.end(), j->released.begin(), j->released.end());
      j->grains.clear();
      j->stored.clear();
      j->released.clear();
    }
    if (carry_grains) SortUnique(grains);  // else each grain is on one list, once
    c.grains.reserve(grains.size());
    for (uint64_t v : grains) {  // at the cut
      dirty_.Clear(v, std::memory_order_relaxed);
      c.grains.emplace_back(v, Get(v));
    }
    held.clear();
    // Journals of closed queues are empty now: their usage moves to the base.
    std::erase_if(journals_, [&](const std::unique_ptr<Journal>& j) {
      if (!j->closed) return false;
      base_.live += j->live;
      base_.zeros += j->zeros;
      base_.used += j->used;
      return true;
    });
  }
  return c;
}

void UnitMap::Restore(Capture c) {
  std::lock_guard lock(journals_mu_);
  carry_.grains.insert(carry_.grains.end(), c.grains.begin(), c.grains.end());
  carry_.stored.insert(carry_.stored.end(), c.stored.begin(), c.stored.end());
  carry_.released.insert(carry_.released.end(), c.released.begin(), c.released.end());
}

void UnitMap::Reclaim(Capture& c, const Reclaimer& reclaim, std::vector<uint64_t>* freed) {
  std::vector<uint64_t> candidates;
  {
    std::lock_guard lock(journals_mu_);
    // Readers of generation g0 or before may have looked up what this cut released. Advance
    // the generation if nobody is left in the one before; a unit that waits out generation t is
    // then free of readers once the generation is past t + 1, or is t + 1 and nobody is left
    // in t.
    const uint64_t g0 = gen_.load(std::memory_order_seq_cst);
    const uint64_t gen = Drained(g0 - 1) ? g0 + 1 : g0;
    gen_.store(gen, std::memory_order_seq_cst);
    const bool last_drained = Drained(gen - 1);
    for (uint64_t u : c.released) waiting_.emplace_back(u, g0);
    std::vector<std::pair<uint64_t, uint64_t>> later;
    for (auto [u, t] : waiting_) {
      const uint32_t when = released_in_.Load(u);
      // Not this cut's: reused or released again since (or released twice: freed once).
      if (when == 0 || when > c.epoch || refs_.Load(u) != 0) continue;
      if (gen > t + 1 || (gen == t + 1 && last_drained)) {
        candidates.push_back(u);
      } else {
        later.emplace_back(u, t);
      }
    }
    waiting_ = std::move(later);
  }
  reclaim(candidates, [&](uint64_t u) {
    if (refs_.Load(u, std::memory_order_seq_cst) != 0 || released_in_.Load(u) == 0 ||
        released_in_.Load(u) > c.epoch) {
      return false;
    }
    released_in_.Store(u, 0);  // freed (a unit listed twice is freed once)
    freed->push_back(u);
    return true;
  });
  std::lock_guard lock(alloc_mu_);
  for (uint64_t u : *freed) FreeUnit(u);
  NoteFree();
}

uint64_t UnitMap::free_units() const {
  std::lock_guard lock(alloc_mu_);
  return alloc_.free();
}

void UnitMap::TakeAged(std::vector<uint64_t>* out, uint64_t keep, uint64_t min_run) {
  std::lock_guard lock(alloc_mu_);
  alloc_.TakeAged(out, keep, min_run);
  NoteFree();
}

void UnitMap::TakeStale(std::vector<uint64_t>* out) {
  std::lock_guard lock(alloc_mu_);
  alloc_.TakeStale(out);
  NoteFree();
}

void UnitMap::FinishDiscard(const std::vector<uint64_t>& units) {
  std::lock_guard lock(alloc_mu_);
  alloc_.FreeDiscarded(units);
  NoteFree();
}

// ---------------------------------------------------------------------------------------------
// Loading and checking

void UnitMap::Load(uint64_t v, uint64_t e) {
  const uint64_t old = Exchange(v, e);
  // Unsigned: a decrement wraps, and the sum comes out right.
  loaded_live_.fetch_add(uint64_t{e != kUnmapped} - uint64_t{old != kUnmapped},
                         std::memory_order_relaxed);
  loaded_zeros_.fetch_add(uint64_t{e == kZero} - uint64_t{old == kZero}, std::memory_order_relaxed);
  if (units_ == 0) return;
  if (HasUnit(old)) refs_[UnitOf(old)].fetch_sub(1, std::memory_order_relaxed);
  if (HasUnit(e)) {
    refs_[UnitOf(e)].fetch_add(1, std::memory_order_relaxed);
    loaded_units_.Set(UnitOf(e) / kBlockGrains, std::memory_order_relaxed);
  }
}

void UnitMap::FinishLoad() {
  std::lock_guard lock(journals_mu_);
  base_ = Usage{};
  base_.live = loaded_live_.load(std::memory_order_relaxed);
  base_.zeros = loaded_zeros_.load(std::memory_order_relaxed);
  std::lock_guard al(alloc_mu_);
  for (uint64_t u = NextLoadedUnit(0); u < units_; u = NextLoadedUnit(u + 1)) {
    if (refs_.Load(u) == 0) continue;
    alloc_.MarkUsed(u);
    ++base_.used;
  }
  NoteFree();
}

UnitMap::Usage UnitMap::usage() const {
  std::lock_guard lock(journals_mu_);
  Usage u = base_;
  for (const auto& j : journals_) {
    u.live += j->live.load(std::memory_order_relaxed);
    u.zeros += j->zeros.load(std::memory_order_relaxed);
    u.used += j->used.load(std::memory_order_relaxed);
  }
  std::lock_guard al(alloc_mu_);
  u.allocated = alloc_.used();
  for (const auto& j : journals_) u.allocated -= j->reserved();  // reserved, not used
  return u;
}

void UnitMap::Check(CheckMode mode, const std::string& who, CheckResult* out) {
  if (units_ == 0) return;
  AtomicArray<uint32_t> derived(units_);
  for (uint64_t v = NextWritten(0); v < grains_; v = NextWritten(v + 1)) {
    const uint64_t e = Get(v);
    if (HasUnit(e)) derived[UnitOf(e)].fetch_add(1, std::memory_order_relaxed);
  }
  std::lock_guard lock(journals_mu_);
  std::vector<uint64_t> spoken_for = carry_.released;  // awaiting a commit or readers, reserved
  for (auto [u, t] : waiting_) spoken_for.push_back(u);
  FlatMap<uint32_t> held;  // by every queue
  for (const auto& j : journals_) {
    spoken_for.insert(spoken_for.end(), j->released.begin(), j->released.end());
    j->ForEachReservedRun([&](uint64_t first, uint64_t end) {
      for (uint64_t u = first; u < end; ++u) spoken_for.push_back(u);
    });
    j->held.ForEach([&](uint64_t u, uint32_t n) { *held.Insert(u).first += n; });
  }
  SortUnique(spoken_for);
  std::lock_guard al(alloc_mu_);
  if (freed_twice_) {
    out->Corruption(who + "s freed while free: " + std::to_string(freed_twice_) +
                    " (a unit freed twice may be handed out twice)");
  }
  for (uint64_t u = 0; u < units_; ++u) {
    const uint32_t* holds = held.Find(u);
    const uint32_t d = derived.Load(u), r = refs_.Load(u), h = holds ? *holds : 0;
    auto name = [&] { return who + " " + std::to_string(u); };  // built only for a finding
    if (r != d + h) {
      out->Corruption(name() + ": reference count " + std::to_string(r) + " in memory but " +
                      Counted(d, "map entry uses", "map entries use") + " it" +
                      (h ? " (and " + std::to_string(h) + " hold)" : ""));
    }
    if (d > 0 && !alloc_.IsUsed(u)) {
      out->Corruption(name() + ": used by the map but free in the allocator (doubly usable)");
    }
    if (d + h == 0 && alloc_.IsUsed(u) &&
        !std::binary_search(spoken_for.begin(), spoken_for.end(), u)) {
      out->Leak(name() + ": allocated but unused (lost)");
      if (mode != CheckMode::kReadOnly) {
        alloc_.Free(u);
        ++out->repaired;
      }
    }
  }
  NoteFree();
}

uint64_t UnitMap::memory_bytes() const {
  std::lock_guard lock(alloc_mu_);
  return map32_.resident_bytes() + map64_.resident_bytes() + written_.resident_bytes() +
         loaded_units_.resident_bytes() + locks_.resident_bytes() + dirty_.resident_bytes() +
         refs_.resident_bytes() + released_in_.resident_bytes() + alloc_.memory_bytes();
}

}  // namespace vstack
