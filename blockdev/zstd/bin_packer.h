// BinPacker: where the next compressed fragment goes. Best fit, as VDO's packer chooses (Linux,
// drivers/md/dm-vdo/packer.c: bins kept by free space, a fragment goes into the one that fits
// it most tightly): the fragment goes into the bin, among those with free space, that it fits
// most tightly; only if none fits is a new bin opened.
//
// Bins with free space are of two kinds:
//  - active bins, at most `max_active`: the caller keeps their image in memory and writes
//    fragments into them (Bin is its handle, the zstd queue's Bin*);
//  - holes: bins that were active and still have room, known only by number and free bytes
//    (no memory beyond the index entry), at most `max_holes`. A fragment that fits a hole best
//    re-activates it (the caller reads back the lower block its free space starts in).
// Opening or re-activating a bin when `max_active` are active retires the fullest active one
// (ties: the one activated first) to the holes; adding a hole when `max_holes` are kept seals
// the fullest hole. A bin with less free space than the smallest fragment is sealed at once.
//
// Only the choice: no data, no I/O, no locking (one per queue). Space within a bin is handed
// out in order, so a bin's fragments lie one after the other from offset 0.
#ifndef VSTACK_BLOCKDEV_ZSTD_BIN_PACKER_H_
#define VSTACK_BLOCKDEV_ZSTD_BIN_PACKER_H_

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace vstack {

template <class Bin>
class BinPacker {
 public:
  // A bin by number with its free bytes.
  struct Hole {
    uint32_t bin = 0;
    uint32_t free = 0;
  };
  // Where a fragment goes: an active bin, a hole to re-activate, or a new bin.
  struct Choice {
    enum Kind { kActive, kHole, kNew } kind = kNew;
    Bin active{};  // kActive
    Hole hole;     // kHole (already taken out of the holes)
  };

  // Bins of `bin_bytes`; at most `max_active` (at least 1) active and `max_holes` holes; no
  // fragment is smaller than `min_fragment` bytes (at least 1).
  BinPacker(uint32_t bin_bytes, uint32_t max_active, size_t max_holes, uint32_t min_fragment)
      : bin_bytes_(bin_bytes),
        max_active_(max_active),
        max_holes_(max_holes),
        min_fragment_(min_fragment) {
    assert(max_active >= 1 && min_fragment >= 1);
    active_.reserve(max_active);
  }

  // Chooses the bin `bytes` fit most tightly (ties: an active bin, then the one activated
  // first). A hole chosen leaves the holes: the caller activates it (Activate) or gives it back.
  Choice Choose(uint32_t bytes) {
    const Active* best = nullptr;
    for (const Active& a : active_) {
      if (a.free >= bytes && (best == nullptr || a.free < best->free)) best = &a;
    }
    auto h = holes_.lower_bound(bytes);
    Choice c;
    if (h != holes_.end() && (best == nullptr || h->first < best->free)) {
      c.kind = Choice::kHole;
      c.hole = Hole{h->second, h->first};
      holes_.erase(h);
    } else if (best != nullptr) {
      c.kind = Choice::kActive;
      c.active = best->bin;
    }
    return c;
  }

  // Before activating a bin: if `max_active` are active, removes the fullest (ties: the one
  // activated first) and returns it with its free bytes, for the caller to retire (Retire, once
  // its writes are done).
  std::optional<Bin> MakeRoom(uint32_t* free) {
    if (active_.size() < max_active_) return std::nullopt;
    const auto fullest = std::min_element(  // the first of equals
        active_.begin(), active_.end(),
        [](const Active& a, const Active& b) { return a.free < b.free; });
    const Bin bin = fullest->bin;
    *free = fullest->free;
    active_.erase(fullest);
    return bin;
  }

  // Activates `bin` with `free` bytes free (a new bin: bin_bytes). REQUIRES: room (MakeRoom).
  void Activate(Bin bin, uint32_t free) {
    assert(active_.size() < max_active_);
    active_.push_back(Active{bin, free});
  }

  // Takes `bytes` of active `bin` (REQUIRES: they fit) and returns the offset they start at.
  // If the bin can take no further fragment, it is removed (*full = true): the caller seals it.
  uint32_t Place(Bin bin, uint32_t bytes, bool* full) {
    size_t i = 0;
    while (i < active_.size() && !(active_[i].bin == bin)) ++i;
    assert(i < active_.size() && active_[i].free >= bytes);
    const uint32_t offset = bin_bytes_ - active_[i].free;
    active_[i].free -= bytes;
    *full = active_[i].free < min_fragment_;
    if (*full) active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    return offset;
  }

  // Removes active `bin` (its tail could not be read back): the caller seals it.
  void Remove(Bin bin) {
    std::erase_if(active_, [&](const Active& a) { return a.bin == bin; });
  }

  // Keeps a retired bin with `free` bytes free as a hole. Returns what the caller must seal:
  // the bin itself if it can take no fragment, or the fullest hole if `max_holes` are kept.
  std::optional<Hole> Retire(uint32_t bin, uint32_t free) {
    if (free < min_fragment_ || max_holes_ == 0) return Hole{bin, free};
    std::optional<Hole> sealed;
    if (holes_.size() >= max_holes_) {
      auto fullest = holes_.begin();
      sealed = Hole{fullest->second, fullest->first};
      holes_.erase(fullest);
    }
    holes_.emplace(free, bin);
    return sealed;
  }

  // Removes every active bin (to seal them: at close).
  std::vector<Bin> TakeActive() {
    std::vector<Bin> all;
    for (const Active& a : active_) all.push_back(a.bin);
    active_.clear();
    return all;
  }
  // Removes every hole (to seal them: at close, or to give their space back when full).
  std::vector<Hole> TakeHoles() {
    std::vector<Hole> all;
    for (const auto& [free, bin] : holes_) all.push_back(Hole{bin, free});
    holes_.clear();
    return all;
  }

  size_t active_count() const { return active_.size(); }
  size_t hole_count() const { return holes_.size(); }

 private:
  struct Active {
    Bin bin;
    uint32_t free;
  };

  const uint32_t bin_bytes_;
  const uint32_t max_active_;
  const size_t max_holes_;
  const uint32_t min_fragment_;
  std::vector<Active> active_;               // in the order they were activated
  std::multimap<uint32_t, uint32_t> holes_;  // free bytes -> bin; equal keys in insertion order
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_ZSTD_BIN_PACKER_H_
