#include "formats/vhdx/vhdx_log_writer.h"

#include <algorithm>
#include <cstring>

#include "formats/vhdx/vhdx_io.h"
#include "lib/aligned_buffer.h"

namespace vstack::vhdx {

LogWriter::LogWriter(const VhdxImage& image, uint64_t durable_file_size)
    : log_offset_(image.header.log_offset),
      log_length_(image.header.log_length),
      guid_(image.header.log_guid),
      durable_file_size_(durable_file_size) {
  // One header sector holds 126 descriptors; the entry must fit in the log.
  max_pages_ = std::min<uint64_t>(126, log_length_ / kLogSector - 1);
}

Result<LogWriter::Written> LogWriter::Append(IoQueue& q, std::span<const LogPage> pages,
                                             uint64_t last_file_offset,
                                             std::vector<IoRequest*> with) {
  Written out;
  if (pages.empty() || pages.size() > max_pages_) {
    return MakeError(Errc::kInvalidArgument, "vhdx: a log entry of " +
                                                 std::to_string(pages.size()) + " pages (at most " +
                                                 std::to_string(max_pages_) + ")");
  }
  const uint64_t length = LogEntryLength(pages.size());
  if (head_pos_ - tail_pos_ + length > log_length_) {
    // The entry would overwrite entries whose in-place writes may not be durable yet.
    VSTACK_RETURN_IF_ERROR(FlushQueue(q));
    tail_pos_ = head_pos_;
    out.flushed = true;
  }
  LogEntryInfo info;
  info.sequence = next_sequence_++;
  info.tail = static_cast<uint32_t>(tail_pos_ % log_length_);
  info.flushed_file_offset = durable_file_size_;
  info.last_file_offset = last_file_offset;
  const std::vector<uint8_t> bytes = EncodeLogEntry(guid_, info, pages);
  AlignedBuffer entry(bytes.size());
  std::memcpy(entry.data(), bytes.data(), bytes.size());
  // The entry, with FUA, in one piece or two when it wraps around the log's end.
  const uint64_t at = head_pos_ % log_length_;
  const uint64_t first_part = std::min<uint64_t>(entry.size(), log_length_ - at);
  IoRequest writes[2];
  iovec iov[2] = {{entry.data(), first_part},
                  {entry.data() + first_part, entry.size() - first_part}};
  for (int i = 0; i < (first_part < entry.size() ? 2 : 1); ++i) {
    writes[i].op = Op::kWrite;
    writes[i].flags = kIoFua;
    writes[i].offset = log_offset_ + (i == 0 ? at : 0);
    writes[i].length = iov[i].iov_len;
    writes[i].iov = &iov[i];
    writes[i].iovcnt = 1;
    with.push_back(&writes[i]);
  }
  VSTACK_RETURN_IF_ERROR(RunAll(q, with));
  head_pos_ += entry.size();
  out.entry_bytes = entry.size();
  return out;
}

}  // namespace vstack::vhdx
