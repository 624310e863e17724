// AtomicArray<T>: a fixed-size array of integers, all zero at first, that every thread may read
// and change at once through atomic operations (std::atomic_ref), sized once, up front. Its
// memory is a ZeroedArray's, reserved, not taken: the kernel backs a page on its first write, so
// a grain layer over a mostly empty 1 TiB device holds only the pages of the grains it has
// touched, and nothing on the data path ever allocates or resizes it. T is an unsigned integer
// of at most 8 bytes. AtomicBits below: the same, a bit each.
#ifndef VSTACK_BLOCKDEV_METASTORE_ATOMIC_ARRAY_H_
#define VSTACK_BLOCKDEV_METASTORE_ATOMIC_ARRAY_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

#include "blockdev/metastore/zeroed_array.h"

namespace vstack {

template <typename T>
class AtomicArray {
 public:
  explicit AtomicArray(uint64_t size = 0) : words_(size) {}

  uint64_t size() const { return words_.size(); }
  // Bytes reserved (the pages actually used are those written so far).
  uint64_t bytes() const { return words_.bytes(); }
  // Bytes of the pages written so far: the memory the array takes.
  uint64_t resident_bytes() const { return words_.resident_bytes(); }

  // Element i, for atomic access from any thread. REQUIRES: i < size().
  std::atomic_ref<T> operator[](uint64_t i) const { return std::atomic_ref<T>(words_.data()[i]); }
  T Load(uint64_t i, std::memory_order o = std::memory_order_acquire) const {
    return (*this)[i].load(o);
  }
  void Store(uint64_t i, T v, std::memory_order o = std::memory_order_release) const {
    (*this)[i].store(v, o);
  }

 private:
  ZeroedArray<T> words_;
};

// AtomicBits: a fixed-size array of bits, all clear at first, on AtomicArray words (reserved, not
// taken, in the same way), that every thread may test, set and clear at once. Set and Clear
// look first and write only a bit that changes, so a bit set twice or cleared while clear costs
// no atomic write (nor a page never written before).
class AtomicBits {
 public:
  explicit AtomicBits(uint64_t bits = 0) : words_((bits + 63) / 64) {}

  uint64_t bytes() const { return words_.bytes(); }
  uint64_t resident_bytes() const { return words_.resident_bytes(); }
  bool Test(uint64_t i, std::memory_order o = std::memory_order_acquire) const {
    return words_.Load(i / 64, o) & Bit(i);
  }
  // The first set bit in [i, end), or `end`: a word at a time.
  uint64_t NextSet(uint64_t i, uint64_t end) const {
    if (i >= end) return end;
    uint64_t word = words_.Load(i / 64) & (~uint64_t{0} << (i % 64));
    while (word == 0) {
      i = (i / 64 + 1) * 64;
      if (i >= end) return end;
      word = words_.Load(i / 64);
    }
    return std::min(end, i / 64 * 64 + uint64_t(__builtin_ctzll(word)));
  }
  // Set and Clear return the bit as it was; `o` orders their write.
  bool Set(uint64_t i, std::memory_order o = std::memory_order_acq_rel) const {
    return Test(i, std::memory_order_relaxed) || (words_[i / 64].fetch_or(Bit(i), o) & Bit(i));
  }
  bool Clear(uint64_t i, std::memory_order o = std::memory_order_acq_rel) const {
    return Test(i, std::memory_order_relaxed) && (words_[i / 64].fetch_and(~Bit(i), o) & Bit(i));
  }

 private:
  // Word w holds bits [64 w, 64 w + 64), bit i at 1 << (i % 64).
  static uint64_t Bit(uint64_t i) { return uint64_t{1} << (i % 64); }

  AtomicArray<uint64_t> words_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_ATOMIC_ARRAY_H_
