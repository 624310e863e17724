// FlatMap<V>: a hash map from 64-bit integers (grain and bin numbers) to small values, with
// open addressing and linear probing in one array, so inserting and erasing on the data path
// allocates nothing (std::unordered_map allocates a node per insert). Erase shifts the following
// entries back (no tombstones); their home slots come from the key alone, so that is cheap.
// Grows at 70% load. Not thread-safe. The key ~0 is reserved.
#ifndef VSTACK_BLOCKDEV_METASTORE_FLAT_MAP_H_
#define VSTACK_BLOCKDEV_METASTORE_FLAT_MAP_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace vstack {

template <typename V>
class FlatMap {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  FlatMap() : slots_(16) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // The value of `key`, or nullptr.
  V* Find(uint64_t key) {
    for (size_t s = Home(key);; s = Next(s)) {
      if (slots_[s].key == key) return &slots_[s].value;
      if (slots_[s].key == kEmpty) return nullptr;
    }
  }
  const V* Find(uint64_t key) const { return const_cast<FlatMap*>(this)->Find(key); }
  bool Contains(uint64_t key) const { return Find(key) != nullptr; }

  // Inserts `key` with `value` unless present; returns the entry and whether it was inserted.
  std::pair<V*, bool> Insert(uint64_t key, V value = V{}) {
    if ((size_ + 1) * 10 > slots_.size() * 7) Grow();
    size_t s = Home(key);
    for (; slots_[s].key != kEmpty; s = Next(s)) {
      if (slots_[s].key == key) return {&slots_[s].value, false};
    }
    slots_[s] = Slot{key, std::move(value)};
    ++size_;
    return {&slots_[s].value, true};
  }
  V& operator[](uint64_t key) { return *Insert(key).first; }

  // Removes `key`; false if it was not there.
  bool Erase(uint64_t key) {
    size_t s = Home(key);
    for (;; s = Next(s)) {
      if (slots_[s].key == kEmpty) return false;
      if (slots_[s].key == key) break;
    }
    size_t hole = s;
    for (size_t j = Next(s); slots_[j].key != kEmpty; j = Next(j)) {
      const size_t home = Home(slots_[j].key);
      // j may move into the hole unless its home lies cyclically in (hole, j].
      const bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!stays) {
        slots_[hole] = std::move(slots_[j]);
        hole = j;
      }
    }
    slots_[hole].key = kEmpty;
    --size_;
    return true;
  }

  // Removes every entry; keeps the capacity.
  void Clear() {
    for (Slot& s : slots_) s.key = kEmpty;
    size_ = 0;
  }

  // Calls fn(key, value&) for every entry. `fn` must not insert or erase.
  template <typename Fn>
  void ForEach(Fn fn) {
    for (Slot& s : slots_) {
      if (s.key != kEmpty) fn(s.key, s.value);
    }
  }

 private:
  struct Slot {
    uint64_t key = kEmpty;
    V value{};
  };
  size_t Home(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  size_t Next(size_t s) const { return (s + 1) & (slots_.size() - 1); }
  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    --shift_;
    size_ = 0;
    for (Slot& s : old) {
      if (s.key != kEmpty) Insert(s.key, std::move(s.value));
    }
  }

  std::vector<Slot> slots_;
  int shift_ = 60;  // 64 - log2(slots)
  size_t size_ = 0;
};

// A set of 64-bit integers: a FlatMap without values.
class FlatSet {
 public:
  bool Insert(uint64_t key) { return map_.Insert(key).second; }
  bool Erase(uint64_t key) { return map_.Erase(key); }
  bool Contains(uint64_t key) const { return map_.Contains(key); }
  size_t size() const { return map_.size(); }

 private:
  struct Empty {};
  FlatMap<Empty> map_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_FLAT_MAP_H_
