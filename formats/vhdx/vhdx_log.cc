#include "formats/vhdx/vhdx_log.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "lib/endian.h"

namespace vstack::vhdx {
namespace {

constexpr size_t kEntryHeaderSize = 64;
constexpr size_t kDescriptorSize = 32;
constexpr size_t kPayloadPerSector = kLogSector - 12;  // 4084: between "data"+high and low

size_t HeaderAreaSize(size_t descriptors) {
  return (kEntryHeaderSize + kDescriptorSize * descriptors + kLogSector - 1) / kLogSector *
         kLogSector;
}

// `length` bytes of the circular log starting at `offset`.
std::vector<uint8_t> CircularRead(std::span<const uint8_t> log, uint64_t offset, uint64_t length) {
  std::vector<uint8_t> out(length);
  for (uint64_t done = 0; done < length;) {
    const uint64_t at = (offset + done) % log.size();
    const uint64_t n = std::min<uint64_t>(length - done, log.size() - at);
    std::memcpy(out.data() + done, log.data() + at, n);
    done += n;
  }
  return out;
}

struct Parsed {
  LogEntryInfo info;
  uint32_t length = 0;
  uint32_t offset = 0;
};

// The entry at `offset` if it is valid: signature, sizes, GUID, checksum, descriptors and
// their data sectors.
bool ParseEntry(std::span<const uint8_t> log, uint32_t offset, const Guid& guid, Parsed* out,
                std::vector<uint8_t>* bytes_out) {
  const uint8_t* h = log.data() + offset;
  if (std::memcmp(h, "loge", 4) != 0) return false;
  const uint32_t length = LoadLE32(h + 8);
  const uint32_t tail = LoadLE32(h + 12);
  const uint64_t seq = LoadLE64(h + 16);
  const uint32_t count = LoadLE32(h + 24);
  if (length < kLogSector || length % kLogSector != 0 || length > log.size()) return false;
  if (tail % kLogSector != 0 || tail >= log.size() || seq == 0) return false;
  if (std::memcmp(h + 32, guid.bytes.data(), 16) != 0) return false;
  if (count > (length - kEntryHeaderSize) / kDescriptorSize) return false;
  if (HeaderAreaSize(count) > length) return false;
  std::vector<uint8_t> e = CircularRead(log, offset, length);
  if (LoadLE32(e.data() + 4) != Checksum(e, 4)) return false;
  size_t data_sector = HeaderAreaSize(count);
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* d = e.data() + kEntryHeaderSize + kDescriptorSize * i;
    const bool is_data = std::memcmp(d, "desc", 4) == 0;
    if (!is_data && std::memcmp(d, "zero", 4) != 0) return false;
    if (LoadLE64(d + 24) != seq || LoadLE64(d + 16) % kLogSector != 0) return false;
    if (!is_data) {
      if (LoadLE64(d + 8) % kLogSector != 0) return false;
      continue;
    }
    if (data_sector + kLogSector > length) return false;
    const uint8_t* s = e.data() + data_sector;
    if (std::memcmp(s, "data", 4) != 0 || LoadLE32(s + 4) != static_cast<uint32_t>(seq >> 32) ||
        LoadLE32(s + kLogSector - 4) != static_cast<uint32_t>(seq)) {
      return false;
    }
    data_sector += kLogSector;
  }
  out->info.sequence = seq;
  out->info.tail = tail;
  out->info.flushed_file_offset = LoadLE64(h + 48);
  out->info.last_file_offset = LoadLE64(h + 56);
  out->length = length;
  out->offset = offset;
  if (bytes_out) *bytes_out = std::move(e);
  return true;
}

}  // namespace

uint64_t LogEntryLength(size_t pages) {
  return HeaderAreaSize(pages) + uint64_t{kLogSector} * pages;
}

std::vector<uint8_t> EncodeLogEntry(const Guid& log_guid, const LogEntryInfo& info,
                                    std::span<const LogPage> pages) {
  const size_t header_area = HeaderAreaSize(pages.size());
  std::vector<uint8_t> e(header_area + kLogSector * pages.size(), 0);
  uint8_t* h = e.data();
  std::memcpy(h, "loge", 4);
  StoreLE32(h + 8, static_cast<uint32_t>(e.size()));
  StoreLE32(h + 12, info.tail);
  StoreLE64(h + 16, info.sequence);
  StoreLE32(h + 24, static_cast<uint32_t>(pages.size()));
  std::memcpy(h + 32, log_guid.bytes.data(), 16);
  StoreLE64(h + 48, info.flushed_file_offset);
  StoreLE64(h + 56, info.last_file_offset);
  for (size_t i = 0; i < pages.size(); ++i) {
    const uint8_t* page = pages[i].data.data();
    uint8_t* d = h + kEntryHeaderSize + kDescriptorSize * i;
    std::memcpy(d, "desc", 4);
    std::memcpy(d + 4, page + kLogSector - 4, 4);  // trailing bytes
    std::memcpy(d + 8, page, 8);                   // leading bytes
    StoreLE64(d + 16, pages[i].file_offset);
    StoreLE64(d + 24, info.sequence);
    uint8_t* s = e.data() + header_area + kLogSector * i;
    std::memcpy(s, "data", 4);
    StoreLE32(s + 4, static_cast<uint32_t>(info.sequence >> 32));
    std::memcpy(s + 8, page + 8, kPayloadPerSector);
    StoreLE32(s + kLogSector - 4, static_cast<uint32_t>(info.sequence));
  }
  StoreLE32(h + 4, Checksum(e, 4));
  return e;
}

ActiveSequence FindActiveSequence(std::span<const uint8_t> log, const Guid& guid) {
  ActiveSequence result;
  if (log.size() < kLogSector || log.size() % kLogSector != 0) return result;
  // Valid entries, scanning forward and skipping over each one found.
  std::vector<Parsed> entries;
  for (uint64_t off = 0; off < log.size();) {
    Parsed p;
    if (ParseEntry(log, static_cast<uint32_t>(off), guid, &p, nullptr)) {
      entries.push_back(p);
      off += p.length;
    } else {
      off += kLogSector;
    }
  }
  std::unordered_map<uint32_t, size_t> by_end;  // (offset + length) % size -> entry
  for (size_t i = 0; i < entries.size(); ++i) {
    by_end[static_cast<uint32_t>((entries[i].offset + entries[i].length) % log.size())] = i;
  }
  if (entries.empty()) return result;
  // The newest entry is the head; the sequence reaches back through consecutive entries (each
  // ending where the next begins, sequence numbers one apart) to the tail the head names, or
  // as far as such entries go: qemu writes a tail that need not be in the sequence, and an
  // entry overwritten by a wrap was made durable in place first, so a suffix replays safely.
  size_t head = 0;
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].info.sequence > entries[head].info.sequence) head = i;
  }
  std::vector<uint32_t> chain{entries[head].offset};
  for (size_t cur = head;
       entries[cur].offset != entries[head].info.tail && chain.size() < entries.size();) {
    auto it = by_end.find(entries[cur].offset);
    if (it == by_end.end() || entries[it->second].info.sequence + 1 != entries[cur].info.sequence) {
      break;
    }
    cur = it->second;
    chain.push_back(entries[cur].offset);
  }
  std::reverse(chain.begin(), chain.end());
  result.found = true;
  result.offsets = std::move(chain);
  result.head = entries[head].info;
  result.end = static_cast<uint32_t>((entries[head].offset + entries[head].length) % log.size());
  return result;
}

std::vector<LogWrite> EntryWrites(std::span<const uint8_t> log, uint32_t offset) {
  std::vector<LogWrite> writes;
  Parsed p;
  std::vector<uint8_t> e;
  Guid guid;
  std::memcpy(guid.bytes.data(), log.data() + offset + 32, 16);
  if (!ParseEntry(log, offset, guid, &p, &e)) return writes;
  const uint32_t count = LoadLE32(e.data() + 24);
  size_t data_sector = HeaderAreaSize(count);
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* d = e.data() + kEntryHeaderSize + kDescriptorSize * i;
    LogWrite w;
    w.file_offset = LoadLE64(d + 16);
    if (std::memcmp(d, "zero", 4) == 0) {
      w.zero = true;
      w.length = LoadLE64(d + 8);
    } else {
      w.length = kLogSector;
      w.data.resize(kLogSector);
      std::memcpy(w.data.data(), d + 8, 8);
      std::memcpy(w.data.data() + 8, e.data() + data_sector + 8, kPayloadPerSector);
      std::memcpy(w.data.data() + kLogSector - 4, d + 4, 4);
      data_sector += kLogSector;
    }
    writes.push_back(std::move(w));
  }
  return writes;
}

}  // namespace vstack::vhdx
