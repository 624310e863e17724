#include "formats/vhdx/bat_table.h"

#include <utility>

namespace vstack::vhdx {

BatTable::BatTable(uint64_t entries)
    : entries_(entries), pages_(new std::atomic<Page*>[page_count()]()) {}

BatTable::BatTable(BatTable&& other) noexcept
    : entries_(std::exchange(other.entries_, 0)),
      pages_(std::move(other.pages_)),
      resident_(other.resident_.exchange(0)) {}

BatTable& BatTable::operator=(BatTable&& other) noexcept {
  if (this == &other) return *this;
  BatTable old(std::move(*this));  // its pages are freed on return
  entries_ = std::exchange(other.entries_, 0);
  pages_ = std::move(other.pages_);
  resident_.store(other.resident_.exchange(0));
  return *this;
}

BatTable::~BatTable() {
  if (pages_ == nullptr) return;
  for (uint64_t p = 0; p < page_count(); ++p) delete pages_[p].load(std::memory_order_relaxed);
}

void BatTable::Set(uint64_t index, uint64_t value, std::memory_order order) {
  std::atomic<Page*>& slot = pages_[index / kEntriesPerPage];
  Page* page = slot.load(std::memory_order_acquire);
  if (page == nullptr) {
    if (value == 0) return;
    auto fresh = std::make_unique<Page>();
    if (slot.compare_exchange_strong(page, fresh.get(), std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      page = fresh.release();
      resident_.fetch_add(1, std::memory_order_relaxed);
    }
    // Else another Set published its page first: `page` is that one, ours is freed.
  }
  page->entries[index % kEntriesPerPage].store(value, order);
}

}  // namespace vstack::vhdx
