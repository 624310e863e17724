// memory: a sparse RAM disk. Only pages that were written cost memory, so a 1 TiB device is
// cheap; never-written or discarded ranges read as zeros without touching memory.
//
// Spec: memory:SIZE[,block=512|4096][,prefill=on]
//
// prefill=on allocates every page at open, in one mapping populated by the kernel (so the page
// faults and the allocator's work happen there, not on the data path), and installs them all:
// the device is then fully allocated, like a raw file made with preallocation=full, and holds
// SIZE of RAM from the start. Pages keep their size (4 KiB, no huge pages), so reads and
// writes cost what they cost on a sparse device whose pages were written before.
//
// Pages (4 KiB) hang off a radix tree of atomic pointers, installed without locks. Copying into
// or out of a page holds that page's stripe lock (one of kStripes, by page number), so a read
// racing a write of the same page sees the old or the new page, never a mix (the contract's
// "old or new data per block"), and a page that a discard drops is no longer being read when it
// is reused. Discard and write-zeroes drop whole pages (kCapDiscardZeroes); dropped pages go to
// a free list and are reused, never freed before the device.
#ifndef VSTACK_BLOCKDEV_MEMORY_MEMORY_DEVICE_H_
#define VSTACK_BLOCKDEV_MEMORY_MEMORY_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "lib/block_device.h"

namespace vstack {

class MemoryDevice final : public BlockDevice {
 public:
  static constexpr uint32_t kPageSize = 4096;

  // REQUIRES: size is a positive multiple of block; block is 512 or 4096.
  MemoryDevice(uint64_t size, uint32_t block, bool read_only = false);
  ~MemoryDevice() override;

  // Allocates and touches every page now (prefill=on). Fails, changing nothing, if the
  // device would not fit in the memory available now or the mapping fails.
  // REQUIRES: no queue has been opened.
  Status Prefill();

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override;
  // Fresh while no page holds data (prefilled pages hold zeros until a write): there is
  // nothing to lose.
  bool fresh() const override {
    return resident_bytes() == 0 || (prefilled() && !written_.load(std::memory_order_relaxed));
  }
  bool prefilled() const { return slab_ != nullptr; }

  // Bytes of page memory currently holding data.
  uint64_t resident_bytes() const { return resident_pages_.load() * kPageSize; }

  // Data-path primitives, used by the queue. Thread-safe.
  void ReadInto(uint64_t offset, const iovec* iov, uint32_t iovcnt, uint64_t length) const;
  void WriteFrom(uint64_t offset, const iovec* iov, uint32_t iovcnt, uint64_t length);
  void Zero(uint64_t offset, uint64_t length);

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;

 private:
  struct Node;
  static constexpr int kBits = 9;  // 512 slots per radix node
  static constexpr uint64_t kFanout = 1u << kBits;

  // The slot holding page `page`'s pointer, creating interior nodes when `create`.
  std::atomic<void*>* Slot(uint64_t page, bool create) const;
  // From `page`: how many pages share its presence as far as one walk down the tree shows
  // (a whole absent subtree, or 1), and whether they are present.
  uint64_t PresentRun(uint64_t page, bool* present) const;
  char* PageForWrite(uint64_t page);
  const char* PageForRead(uint64_t page) const;
  void DropPage(uint64_t page);
  char* AllocatePage();
  void FreeTree(Node* node, int level);
  // Frees a page unless it lies in the prefill mapping (freed whole, with the device).
  void FreePage(char* page) const;

  // The lock held while a page's bytes (or its slot, when dropped) are accessed.
  std::mutex& StripeOf(uint64_t page) const { return stripes_[page % kStripes].mu; }

  static constexpr uint64_t kStripes = 64;
  struct alignas(64) Stripe {
    std::mutex mu;
  };
  mutable Stripe stripes_[kStripes];
  int levels_;
  Node* root_;
  std::atomic<uint64_t> resident_pages_{0};
  char* slab_ = nullptr;  // the prefill mapping (every page's first home), or none
  uint64_t slab_bytes_ = 0;
  std::atomic<bool> written_{false};  // a write has reached a prefilled device
  std::mutex free_mu_;
  std::vector<char*> free_pages_;  // guarded by free_mu_
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_MEMORY_MEMORY_DEVICE_H_
