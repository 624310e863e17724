#include "blockdev/metastore/table_page.h"

#include <algorithm>
#include <vector>

#include "blockdev/metastore/crc32c.h"
#include "lib/aligned_buffer.h"
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
  auto where = [&] {  // built only for an error: a checkpoint checks every page it rewrites
    return who + ": metadata table " + std::to_string(table) + " page " + std::to_string(page_no) +
           " at offset " + std::to_string(device_offset);
  };
  if (LoadLE32(page + 4) != static_cast<uint32_t>(page_no)) {
    return MakeError(Errc::kCorruption, where() + ": page number field is " +
                                            std::to_string(LoadLE32(page + 4)));
  }
  if (LoadLE32(page) != PageCrc(page, volume_id, table)) {
    return MakeError(Errc::kCorruption, where() + ": checksum mismatch");
  }
  return OkStatus();
}

bool TornTablePage(const uint8_t* page, uint64_t page_no, uint64_t used_bytes) {
  const uint32_t number = LoadLE32(page + 4);
  if (number != static_cast<uint32_t>(page_no) && (number != 0 || LoadLE32(page) != 0)) {
    return false;
  }
  const uint64_t end = kTablePageHeader + used_bytes;
  return end <= kMetaPageSize && IsZero(page + end, kMetaPageSize - end);
}

Status ReadTablePages(SyncIo& io, const Superblock& sb, uint32_t t, const std::string& who,
                      const TablePageSink& fn) {
  constexpr uint64_t kPagesPerChunk = 256;  // 1 MiB per read
  const TableDesc& d = sb.tables[t];
  AlignedBuffer chunk(std::clamp<uint64_t>(d.pages(), 1, kPagesPerChunk) * kMetaPageSize);
  for (uint64_t first = 0; first < d.pages(); first += kPagesPerChunk) {
    const uint64_t n = std::min<uint64_t>(kPagesPerChunk, d.pages() - first);
    const uint64_t offset = d.offset + first * kMetaPageSize;
    if (std::error_code ec = io.Read(offset, chunk.span().first(n * kMetaPageSize))) {
      return MakeError(ec, who + ": cannot read metadata table " + std::to_string(t) +
                               " at offset " + std::to_string(offset) + ": " + ec.message());
    }
    for (uint64_t i = 0; i < n; ++i) {
      const auto* page = reinterpret_cast<const uint8_t*>(chunk.data()) + i * kMetaPageSize;
      if (IsZero(page, kMetaPageSize)) continue;  // never written: zero entries
      VSTACK_RETURN_IF_ERROR(fn(first + i, page,
                                CheckTablePage(page, sb.volume_id, t, first + i,
                                               offset + i * kMetaPageSize, who)));
    }
  }
  return OkStatus();
}

Status WriteTablePages(SyncIo& io, const Superblock& sb, uint32_t t,
                       std::span<const uint64_t> pages,
                       const std::function<void(uint64_t page_no, uint8_t* entries)>& fill,
                       IoFlags flags, const std::string& who) {
  if (pages.empty()) return OkStatus();
  IoQueue* q = io.queue();
  if (q == nullptr) return Annotate(io.open_error(), who + ": no queue for metadata");
  AlignedBuffer buf(pages.size() * kMetaPageSize);
  std::vector<IoRequest> reqs(pages.size());
  std::vector<iovec> iov(pages.size());
  for (size_t i = 0; i < pages.size(); ++i) {
    auto* page = reinterpret_cast<uint8_t*>(buf.data()) + i * kMetaPageSize;
    fill(pages[i], page + kTablePageHeader);
    SealTablePage(page, sb.volume_id, t, pages[i]);
    iov[i] = iovec{page, kMetaPageSize};
    reqs[i].op = Op::kWrite;
    reqs[i].flags = flags;
    reqs[i].offset = sb.tables[t].offset + pages[i] * kMetaPageSize;
    reqs[i].length = kMetaPageSize;
    reqs[i].iov = &iov[i];
    reqs[i].iovcnt = 1;
  }
  if (std::error_code ec = RunRequests(*q, reqs)) {
    return MakeError(ec, who + ": cannot write metadata table " + std::to_string(t) + ": " +
                             ec.message());
  }
  return OkStatus();
}

std::error_code RunRequests(IoQueue& queue, std::span<IoRequest> reqs) {
  size_t done = 0;
  std::vector<IoRequest*> ptrs;
  for (IoRequest& r : reqs) {
    r.on_complete = [](IoRequest& req) { ++*static_cast<size_t*>(req.user_data); };
    r.user_data = &done;
    ptrs.push_back(&r);
  }
  queue.Submit(ptrs);
  while (done < reqs.size()) queue.Poll(1);
  for (const IoRequest& r : reqs) {
    if (r.status) return r.status;
  }
  return {};
}

}  // namespace vstack
