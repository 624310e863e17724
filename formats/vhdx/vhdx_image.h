// Opening a VHDX: the file identifier, the current header, log replay, the region table, the
// metadata and the BAT, read from the device below and validated. Also the header update
// (both slots, each with a higher sequence number, as qemu and Hyper-V do).
//
// Memory is bounded by what the file holds: the BAT is read in 1 MiB chunks only after the
// region that holds it is known to lie inside the file and to be large enough for the entries
// the virtual size and block size need, chunks that the device below maps as zeros are not
// read, and only its pages with a non-zero entry are kept (bat_table.h); the log is read only
// when its GUID says it may hold entries, and only up to 256 MiB.
#ifndef VSTACK_FORMATS_VHDX_VHDX_IMAGE_H_
#define VSTACK_FORMATS_VHDX_VHDX_IMAGE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "formats/vhdx/bat_table.h"
#include "formats/vhdx/vhdx_format.h"
#include "formats/vhdx/vhdx_log.h"
#include "lib/block_device.h"

namespace vstack::vhdx {

inline constexpr uint32_t kMaxLogLength = 256u << 20;
// BAT entries marked unusable in memory (lenient loads): data I/O to them fails.
inline constexpr uint8_t kUnusableState = 5;

struct VhdxImage {
  uint64_t file_size = 0;
  std::string creator;
  Header header;
  int header_slot = 0;  // which of the two headers is current
  Region bat_region;
  Region metadata_region;
  Metadata metadata;
  BatLayout layout;
  BatTable bat;                       // layout.entries entries, pages with one not 0
  uint64_t replayed_entries = 0;      // log entries replayed while opening
  // The replay could not finish for lack of space below (its writes in place, or the write that
  // makes the file's length durable): the log is left as it was, replayed again before the
  // first write (SettleLog) or at the next open.
  bool log_kept = false;
  // The log's writes when they could not all be written in place: the BAT and the metadata
  // were loaded through them. Bounded by the log's length (kMaxLogLength).
  std::vector<LogWrite> unreplayed;
  uint64_t metadata_end = 0;          // end of the last structure that is not a payload block
  std::vector<std::string> problems;  // corruption found by a lenient load
  // The entries a lenient load marked kUnusableState, as the file holds them: BAT index and
  // entry, by index.
  std::vector<std::pair<uint64_t, uint64_t>> unusable;
};

// What to write for BAT entry `index` whose value in memory is `value`: the file's own entry
// where the load marked it unusable (a write of its BAT page must not drop a pointer that
// `vstack check` reported), else `value`.
uint64_t OnDiskEntry(const VhdxImage& image, uint64_t index, uint64_t value);
// The first offset at or after `offset` (1 MiB aligned) where `length` bytes overlap no block an
// unusable entry points at: new space never goes where such an entry still points.
uint64_t PastUnusable(const VhdxImage& image, uint64_t offset, uint64_t length);

// Reads the VHDX on `device` through `q` (a queue of `device`). A log with entries to replay
// is replayed when `writable` (then the header is rewritten with an empty log) and refused
// with an error otherwise, as qemu does. `lenient` (vstack check) records bad BAT entries in
// `problems` and marks them kUnusableState instead of failing.
Result<VhdxImage> LoadImage(BlockDevice& device, IoQueue& q, bool writable, bool lenient);

// If the replay kept the log: writes what it could not write in place, and the file's last
// sector back as it reads, and flushes, making the log's writes and the length durable; an
// error (no space) if it still cannot. Before the first write after open, which starts a new
// log.
Status SettleLog(BlockDevice& device, IoQueue& q, VhdxImage* image);

// Writes `h` with the next sequence number into both header slots, the non-current one first,
// flushing after each, and updates image->header and header_slot.
Status WriteHeaders(IoQueue& q, VhdxImage* image, const Header& h);

// True if the device holds a VHDX: the "vhdxfile" identifier at offset 0 and at least one of
// the two headers valid (signature, CRC-32C, versions, log placement). A device with the
// identifier but no valid header is not one: `problem` (if given) then receives why, naming
// the offsets, so that OpenImage reports it instead of guessing (docs/stack-spec.md).
bool ProbeImage(BlockDevice& device, std::string* problem = nullptr);

}  // namespace vstack::vhdx

#endif  // VSTACK_FORMATS_VHDX_VHDX_IMAGE_H_
