// The page format of metadata tables: 4 KiB pages of fixed-size entries behind an 8-byte header
// [u32 crc32c][u32 page number]. The checksum covers bytes 4..4095 and is seeded with the volume
// id and the table number, so a page of another table, another position or an earlier format
// never validates. A page that is all zeros is a valid page of zero entries: tables start out
// sparse and a page is first written when one of its entries changes.
#ifndef VSTACK_BLOCKDEV_METASTORE_TABLE_PAGE_H_
#define VSTACK_BLOCKDEV_METASTORE_TABLE_PAGE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "blockdev/metastore/superblock.h"
#include "lib/errors.h"
#include "lib/sync_io.h"

namespace vstack {

inline constexpr uint32_t kTablePageHeader = 8;

// Entries of `entry_size` bytes that fit in one page (0 if entry_size is 0 or too large).
uint32_t TablePageCapacity(uint32_t entry_size);

// Fills in the header of `page` (4 KiB) for page `page_no` of table `table`.
void SealTablePage(uint8_t* page, uint64_t volume_id, uint32_t table, uint64_t page_no);

// OK if `page` is blank or carries a valid header for this position; otherwise a kCorruption
// error naming the table, the page and its byte offset on the device below.
Status CheckTablePage(const uint8_t* page, uint64_t volume_id, uint32_t table, uint64_t page_no,
                      uint64_t device_offset, const std::string& who);

// Whether `page`, which failed CheckTablePage, can be a write of page `page_no` that a crash tore
// sector by sector: its header is that page's (or zero: a page never written before) and nothing
// follows its entries (`used_bytes` after the header). Each entry is then that of one write or
// the other; the caller says whether it holds only values a write can have put there.
bool TornTablePage(const uint8_t* page, uint64_t page_no, uint64_t used_bytes);

// ---- Page I/O: what MetaStore does with its tables, for a layer that keeps tables in place
// (crc32c) too.

// Reads every page of table `t` of `sb` in batches and calls fn(page_no, page, check) for each
// page that is not all zeros, where `check` is CheckTablePage's verdict: a page a crash tore
// (sector by sector) fails it, and the caller decides whether its journal or its own state makes
// that harmless. A page of zeros was never written (format zeroes the tables): its entries are
// zero, the value every caller starts from, so fn never sees it. Stops at the first error of a
// read or of fn.
using TablePageSink =
    std::function<Status(uint64_t page_no, const uint8_t* page, const Status& check)>;
Status ReadTablePages(SyncIo& io, const Superblock& sb, uint32_t t, const std::string& who,
                      const TablePageSink& fn);

// Submits every request of `reqs` as one batch on `queue` and polls until all have completed.
// Returns the first error. Their callbacks are overwritten.
std::error_code RunRequests(IoQueue& queue, std::span<IoRequest> reqs);

// Writes pages `pages` of table `t`, each zeroed, filled by fill(page_no, entries) (the bytes
// after the header) and sealed, as one batch with `flags`.
Status WriteTablePages(SyncIo& io, const Superblock& sb, uint32_t t,
                       std::span<const uint64_t> pages,
                       const std::function<void(uint64_t page_no, uint8_t* entries)>& fill,
                       IoFlags flags, const std::string& who);

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_TABLE_PAGE_H_
