// JournaledRecords: the metadata records a MetaStore journaled since its last checkpoint, kept in
// journal order and bucketed by table page as they are appended, so that a checkpoint visits each
// page it must rewrite with that page's records in journal order without sorting all the
// records (at most one hash probe per record on append, none when the record falls on the page
// of its table's previous record, instead of an O(n log n) sort at the checkpoint; only the
// distinct pages are sorted, for ascending writes).
//
// A record is [u8 table][u48 index, little endian][entry_size bytes of entry]; the caller checks
// records before appending them (table and index within the layout). Not thread-safe: the
// MetaStore guards it with its commit lock.
#ifndef VSTACK_BLOCKDEV_METASTORE_JOURNALED_RECORDS_H_
#define VSTACK_BLOCKDEV_METASTORE_JOURNALED_RECORDS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "blockdev/metastore/flat_map.h"
#include "blockdev/metastore/journal_txn.h"
#include "blockdev/metastore/superblock.h"

namespace vstack {

class JournaledRecords {
 public:
  // A table page that at least one record changes, and the chain of its records.
  struct Page {
    uint32_t table = 0;
    uint64_t page = 0;
    uint32_t first = 0;  // index of its first record in the chain (see ForEachOfPage)
    uint32_t last = 0;
  };

  // `tables`: the layout's tables (their entry sizes and entries per page are copied).
  explicit JournaledRecords(const std::vector<TableDesc>& tables);

  bool empty() const { return bytes_.empty(); }
  size_t bytes() const { return bytes_.size(); }

  // Appends `n` bytes of whole records (a transaction's payload) and files each by its page.
  void Append(const uint8_t* records, size_t n);

  // Calls fn(table, index, entry) for every record, in journal order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (size_t at = 0; at < bytes_.size(); at += RecordSize(bytes_[at])) {
      fn(uint32_t{bytes_[at]}, LoadLE48(&bytes_[at + 1]), &bytes_[at + 7]);
    }
  }

  // The pages that records change, in (table, page) order.
  std::vector<Page> SortedPages() const;
  // True if a record changes page `page` of `table`.
  bool Touches(uint32_t table, uint64_t page) const { return slot_.Contains(Key(table, page)); }

  // Calls fn(slot, entry) for the records of `page` (from SortedPages), in journal order; `slot`
  // is the entry's position in its page (its index modulo the entries per page).
  template <typename Fn>
  void ForEachOfPage(const Page& page, Fn fn) const {
    for (uint32_t n = page.first;; n = chain_[n].next) {
      fn(chain_[n].slot, &bytes_[chain_[n].at + 7]);
      if (n == page.last) break;
    }
  }

  // Forgets every record (after a checkpoint); keeps the capacity for the next ones.
  void Clear();

 private:
  struct Link {
    uint32_t at;    // byte offset of the record (a journal is at most 64 MiB)
    uint32_t slot;  // the entry's position in its page
    uint32_t next;  // the next record of the same page; meaningless for a page's last
  };
  struct Recent {  // per table: the page its last record changed, and its index in pages_
    uint64_t page = ~uint64_t{0};
    uint32_t index = 0;
  };
  static uint64_t Key(uint32_t table, uint64_t page) { return uint64_t{table} << 56 | page; }
  size_t RecordSize(uint8_t table) const { return record_size_[table]; }

  std::vector<uint32_t> record_size_;  // bytes per record, per table
  std::vector<uint32_t> per_page_;     // entries per page, per table
  std::vector<uint8_t> bytes_;         // the records, in journal order
  std::vector<Link> chain_;            // one per record, in journal order
  std::vector<Page> pages_;            // in the order first touched
  FlatMap<uint32_t> slot_;             // Key(table, page) -> index in pages_
  std::vector<Recent> recent_;         // one per table
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_JOURNALED_RECORDS_H_
