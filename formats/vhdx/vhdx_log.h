// The VHDX metadata log ([MS-VHDX] 2.3): a circular buffer of 4 KiB sectors holding entries
// that describe writes to metadata (BAT pages, the metadata region). An entry is a header
// sector ("loge", CRC-32C over the whole entry, sequence number, tail, log GUID, flushed and
// last file offsets), 32-byte descriptors ("desc": one 4 KiB page; "zero": a zeroed range)
// and one data sector ("data") per page descriptor.
//
// Writing: EncodeLogEntry builds an entry; the device writes it durably before the pages it
// describes are written in place (docs/layers/vhdx.md, "Write order"). Reading: the active
// sequence ends at the valid entry with the highest sequence number and reaches back through
// consecutive entries to the tail it names (or as far as they go, as qemu reads it);
// replaying it in order re-applies every page, which is idempotent.
#ifndef VSTACK_FORMATS_VHDX_VHDX_LOG_H_
#define VSTACK_FORMATS_VHDX_VHDX_LOG_H_

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "formats/vhdx/vhdx_format.h"

namespace vstack::vhdx {

inline constexpr uint32_t kLogSector = 4096;

struct LogPage {
  uint64_t file_offset = 0;  // 4 KiB aligned
  std::array<uint8_t, kLogSector> data{};
};

struct LogEntryInfo {
  uint64_t sequence = 0;
  uint32_t tail = 0;  // offset in the log of the oldest entry not known to be applied
  uint64_t flushed_file_offset = 0;
  uint64_t last_file_offset = 0;
};

// The length of an entry holding `pages` pages: header sectors, then one sector per page.
uint64_t LogEntryLength(size_t pages);

// The bytes of one entry holding `pages` (a multiple of 4 KiB).
std::vector<uint8_t> EncodeLogEntry(const Guid& log_guid, const LogEntryInfo& info,
                                    std::span<const LogPage> pages);

// One write an entry describes: a 4 KiB page, or `length` bytes of zeros.
struct LogWrite {
  uint64_t file_offset = 0;
  uint64_t length = 0;
  bool zero = false;
  std::vector<uint8_t> data;  // kLogSector bytes unless `zero`
};

struct ActiveSequence {
  bool found = false;
  std::vector<uint32_t> offsets;  // entry offsets in the log, oldest (tail) first
  LogEntryInfo head;              // the newest entry
  uint32_t end = 0;               // where the next entry goes
};

// Finds the active sequence of entries carrying `log_guid` in `log` (the whole log region).
// Time is linear in the log's size; memory is one entry at a time.
ActiveSequence FindActiveSequence(std::span<const uint8_t> log, const Guid& log_guid);

// The writes of the valid entry at `offset` (found by FindActiveSequence), in order.
std::vector<LogWrite> EntryWrites(std::span<const uint8_t> log, uint32_t offset);

}  // namespace vstack::vhdx

#endif  // VSTACK_FORMATS_VHDX_VHDX_LOG_H_
