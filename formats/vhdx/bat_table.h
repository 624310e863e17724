// The BAT of an open VHDX, held by what it holds: pages of 512 entries (one 4 KiB BAT page of
// the file), of which only those with a non-zero entry are allocated. Entry 0 is
// PAYLOAD_BLOCK_NOT_PRESENT (SB_BLOCK_NOT_PRESENT for a sector bitmap) with no offset, what a
// BAT region the file leaves a hole holds: a fresh 64 TiB image of 1 MiB blocks costs 8 bytes
// per page pointer (1 MiB), not 8 bytes per entry (512 MiB).
//
// Shared by the queues of a device: every entry is read and written atomically, and a page is
// allocated by the first non-zero Set into it, published with a compare-and-swap of its
// pointer (a Set that loses the race frees its page and writes into the winner's). No lock;
// the only allocation is that first Set into a page. Pages stay until the table is destroyed.
#ifndef VSTACK_FORMATS_VHDX_BAT_TABLE_H_
#define VSTACK_FORMATS_VHDX_BAT_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>

namespace vstack::vhdx {

class BatTable {
 public:
  static constexpr uint64_t kEntriesPerPage = 512;  // 4 KiB of 8-byte entries

  BatTable() = default;
  // `entries` entries, all 0, no page allocated.
  explicit BatTable(uint64_t entries);
  BatTable(BatTable&& other) noexcept;
  BatTable& operator=(BatTable&& other) noexcept;
  ~BatTable();

  uint64_t size() const { return entries_; }
  uint64_t page_count() const { return (entries_ + kEntriesPerPage - 1) / kEntriesPerPage; }
  // Pages allocated: those that hold or held a non-zero entry.
  uint64_t resident_pages() const { return resident_.load(std::memory_order_relaxed); }

  // Entry `index` (< size()): 0 where its page is absent. One more load than an array's.
  uint64_t Get(uint64_t index, std::memory_order order = std::memory_order_acquire) const {
    const Page* page = pages_[index / kEntriesPerPage].load(std::memory_order_acquire);
    return page == nullptr ? 0 : page->entries[index % kEntriesPerPage].load(order);
  }
  // Sets entry `index` (< size()). A 0 into an absent page stays absent; any other value
  // allocates the page first.
  void Set(uint64_t index, uint64_t value, std::memory_order order = std::memory_order_release);

  bool PageResident(uint64_t page) const {
    return pages_[page].load(std::memory_order_acquire) != nullptr;
  }

  // Calls f(index, entry) for every non-zero entry, in index order, skipping absent pages.
  // Entries set meanwhile may or may not be seen.
  template <typename F>
  void ForEachNonZero(F&& f) const {
    for (uint64_t p = 0; p < page_count(); ++p) {
      const Page* page = pages_[p].load(std::memory_order_acquire);
      if (page == nullptr) continue;
      const uint64_t first = p * kEntriesPerPage;
      for (uint64_t i = 0; i < kEntriesPerPage && first + i < entries_; ++i) {
        const uint64_t e = page->entries[i].load(std::memory_order_acquire);
        if (e != 0) f(first + i, e);
      }
    }
  }

 private:
  struct Page {
    std::atomic<uint64_t> entries[kEntriesPerPage] = {};
  };
  static_assert(sizeof(Page) == kEntriesPerPage * 8, "a page is one 4 KiB BAT page");

  uint64_t entries_ = 0;
  std::unique_ptr<std::atomic<Page*>[]> pages_;  // page_count() pointers, null while absent
  std::atomic<uint64_t> resident_{0};
};

}  // namespace vstack::vhdx

#endif  // VSTACK_FORMATS_VHDX_BAT_TABLE_H_
