// JournaledRecords: records in journal order, chained per table page (see the header).
#include "blockdev/metastore/journaled_records.h"

#include <algorithm>

namespace vstack {

JournaledRecords::JournaledRecords(const std::vector<TableDesc>& tables) {
  for (const TableDesc& t : tables) {
    record_size_.push_back(7 + t.entry_size);
    per_page_.push_back(t.per_page());
  }
  recent_.resize(tables.size());
}

void JournaledRecords::Append(const uint8_t* records, size_t n) {
  const size_t base = bytes_.size();
  bytes_.insert(bytes_.end(), records, records + n);
  for (size_t at = base; at < bytes_.size(); at += RecordSize(bytes_[at])) {
    const uint32_t table = bytes_[at];
    const uint64_t index = LoadLE48(&bytes_[at + 1]);
    const uint64_t page = index / per_page_[table];
    const auto link = static_cast<uint32_t>(chain_.size());
    chain_.push_back({static_cast<uint32_t>(at),
                      static_cast<uint32_t>(index - page * per_page_[table]), 0});
    Recent& recent = recent_[table];
    if (recent.page != page) {  // consecutive units (unit records) share a page: no probe
      auto [slot, added] = slot_.Insert(Key(table, page), static_cast<uint32_t>(pages_.size()));
      recent = {page, *slot};
      if (added) {
        pages_.push_back({table, page, link, link});
        continue;
      }
    }
    Page& p = pages_[recent.index];
    chain_[p.last].next = link;
    p.last = link;
  }
}

std::vector<JournaledRecords::Page> JournaledRecords::SortedPages() const {
  std::vector<Page> out = pages_;
  std::sort(out.begin(), out.end(), [](const Page& a, const Page& b) {
    return a.table != b.table ? a.table < b.table : a.page < b.page;
  });
  return out;
}

void JournaledRecords::Clear() {
  bytes_.clear();
  chain_.clear();
  pages_.clear();
  slot_.Clear();
  recent_.assign(recent_.size(), Recent{});
}

}  // namespace vstack
