// A next-fit allocator of numbered units (dedup's physical grains, zstd's bins) over a bitmap:
// it searches from where the previous allocation ended, so sequential writes land on
// consecutive units, and it reuses freed units when the search wraps around. 1 bit per unit.
// Not thread-safe: callers hold their own lock.
#ifndef VSTACK_BLOCKDEV_METASTORE_BITMAP_ALLOCATOR_H_
#define VSTACK_BLOCKDEV_METASTORE_BITMAP_ALLOCATOR_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace vstack {

class BitmapAllocator {
 public:
  explicit BitmapAllocator(uint64_t units = 0);

  // Allocates one free unit, or nullopt when every unit is in use.
  std::optional<uint64_t> Allocate();
  // Allocates up to `max` consecutive units starting with the next free one; returns the first
  // and sets *count (>= 1), or nullopt when every unit is in use.
  std::optional<uint64_t> AllocateRun(uint64_t max, uint64_t* count);
  // Marks `unit` used (loading) or free. REQUIRES: unit < units(), and for Free, that it is used.
  void MarkUsed(uint64_t unit);
  void Free(uint64_t unit);
  bool IsUsed(uint64_t unit) const { return (words_[unit / 64] >> (unit % 64)) & 1; }

  uint64_t units() const { return units_; }
  uint64_t used() const { return used_; }
  uint64_t free() const { return units_ - used_; }
  // Bytes of memory the bitmap takes.
  uint64_t memory_bytes() const { return words_.capacity() * sizeof(uint64_t); }

 private:
  std::optional<uint64_t> FindFree() const;

  uint64_t units_;
  uint64_t used_ = 0;
  uint64_t cursor_ = 0;  // where the next search starts
  std::vector<uint64_t> words_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_BITMAP_ALLOCATOR_H_
