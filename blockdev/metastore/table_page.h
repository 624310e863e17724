// The page format of metadata tables: 4 KiB pages of fixed-size entries behind an 8-byte header
// [u32 crc32c][u32 page number]. The checksum covers bytes 4..4095 and is seeded with the volume
// id and the table number, so a page of another table, another position or an earlier format
// never validates. A page that is all zeros is a valid page of zero entries: tables start out
// sparse and a page is first written when one of its entries changes.
#ifndef VSTACK_BLOCKDEV_METASTORE_TABLE_PAGE_H_
#define VSTACK_BLOCKDEV_METASTORE_TABLE_PAGE_H_

#include <cstdint>
#include <string>

#include "lib/errors.h"

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

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_TABLE_PAGE_H_
