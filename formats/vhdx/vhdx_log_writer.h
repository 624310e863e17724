// Appending entries to the VHDX log of an open image ([MS-VHDX] 2.3; docs/layers/vhdx.md,
// "Write order"). The writer keeps the log's circular positions: the head (where the next
// entry goes) and the tail (the oldest entry whose in-place writes may not be durable yet).
// An entry is written with FUA, together with any requests the caller passes (data that must
// be submitted at the same time); before it would overwrite entries behind the tail, the device
// below is flushed and the tail moves to the head. Used by the device for allocations and by
// compaction. Not thread-safe: the caller serialises (the device's mutex).
#ifndef VSTACK_FORMATS_VHDX_VHDX_LOG_WRITER_H_
#define VSTACK_FORMATS_VHDX_VHDX_LOG_WRITER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "formats/vhdx/vhdx_image.h"
#include "formats/vhdx/vhdx_log.h"

namespace vstack::vhdx {

class LogWriter {
 public:
  // Starts an empty log at the image's log offset and length, with the header's log GUID (the
  // caller has written headers carrying it). `durable_file_size` is a lower bound of the file
  // size known durable (an entry's FlushedFileOffset).
  LogWriter(const VhdxImage& image, uint64_t durable_file_size);

  // The most pages one entry may hold (limited by the log's length).
  size_t max_pages() const { return max_pages_; }

  struct Written {
    uint64_t entry_bytes = 0;
    bool flushed = false;  // the device was flushed first (the log would have wrapped)
  };
  // Writes one entry holding `pages` (1..max_pages()) with FUA, submitting `with` at the same
  // time, and waits for all of them. `last_file_offset` is the file's size once the pages and
  // data are applied. The caller then writes the pages in place.
  Result<Written> Append(IoQueue& q, std::span<const LogPage> pages, uint64_t last_file_offset,
                         std::vector<IoRequest*> with);

  // The device was flushed after the writes of every entry before `head` completed.
  void Flushed(uint64_t head) { tail_pos_ = std::max(tail_pos_, head); }
  uint64_t head() const { return head_pos_; }

 private:
  uint64_t log_offset_;
  uint64_t log_length_;
  Guid guid_;
  uint64_t durable_file_size_;
  size_t max_pages_;
  uint64_t head_pos_ = 0;  // log bytes written (head = head_pos_ % log_length_)
  uint64_t tail_pos_ = 0;
  uint64_t next_sequence_ = 1;
};

}  // namespace vstack::vhdx

#endif  // VSTACK_FORMATS_VHDX_VHDX_LOG_WRITER_H_
