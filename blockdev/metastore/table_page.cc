#include "blockdev/metastore/table_page.h"

#include "blockdev/metastore/crc32c.h"
#include "blockdev/metastore/superblock.h"
#include "lib/endian.h"
#include "lib/iovec.h"

namespace vstack {
namespace {

uint32_t PageCrc(const uint8_t* page, uint64_t volume_id, uint32_t table) {
  uint8_t seed[12];
  StoreLE64(seed, volume_id);
  StoreLE32(seed + 8, table);
  return Crc32cExtend(Crc32c(seed, sizeof seed), page + 4, kMetaPageSize - 4);
}

}  // namespace

uint32_t TablePageCapacity(uint32_t entry_size) {
  if (entry_size == 0 || entry_size > kMetaPageSize - kTablePageHeader) return 0;
  return static_cast<uint32_t>((kMetaPageSize - kTablePageHeader) / entry_size);
}

void SealTablePage(uint8_t* page, uint64_t volume_id, uint32_t table, uint64_t page_no) {
  StoreLE32(page + 4, static_cast<uint32_t>(page_no));
  StoreLE32(page, PageCrc(page, volume_id, table));
}

Status CheckTablePage(const uint8_t* page, uint64_t volume_id, uint32_t table, uint64_t page_no,
                      uint64_t device_offset, const std::string& who) {
  if (IsZero(page, kMetaPageSize)) return OkStatus();
  const std::string where = who + ": metadata table " + std::to_string(table) + " page " +
                            std::to_string(page_no) + " at offset " + std::to_string(device_offset);
  if (LoadLE32(page + 4) != static_cast<uint32_t>(page_no)) {
    return MakeError(Errc::kCorruption, where + ": page number field is " +
                                            std::to_string(LoadLE32(page + 4)));
  }
  if (LoadLE32(page) != PageCrc(page, volume_id, table)) {
    return MakeError(Errc::kCorruption, where + ": checksum mismatch");
  }
  return OkStatus();
}

}  // namespace vstack
