#include "formats/vhdx/vhdx_compact.h"

#include <algorithm>
#include <optional>
#include <set>
#include <span>

#include "formats/vhdx/vhdx_image.h"
#include "formats/vhdx/vhdx_io.h"
#include "formats/vhdx/vhdx_log_writer.h"
#include "lib/endian.h"
#include "lib/iovec.h"
#include "lib/sync_io.h"

namespace vstack::vhdx {
namespace {

constexpr uint64_t kCompactChunk = kMiB;
constexpr uint64_t kEntriesPerPage = BatTable::kEntriesPerPage;

struct Range {
  uint64_t start, end;
};

class Compactor {
 public:
  Compactor(BlockDevice& file, IoQueue& q, VhdxImage image, const CompactProgress& progress)
      : file_(file),
        q_(q),
        img_(std::move(image)),
        progress_(progress),
        bs_(img_.layout.block_size),
        buf_(kCompactChunk) {}

  Result<CompactReport> Run() {
    report_.file_size_before = file_.size_bytes();
    VSTACK_RETURN_IF_ERROR(FreeZeroBlocks());
    VSTACK_RETURN_IF_ERROR(MoveBlocks());
    VSTACK_RETURN_IF_ERROR(Finish());
    report_.file_size_after = file_.size_bytes();
    return report_;
  }

 private:
  const BatLayout& layout() const { return img_.layout; }
  uint64_t Block(uint64_t index) const { return index - index / (layout().chunk_ratio + 1); }
  // The bytes of payload block `index` that lie inside the virtual disk (the file may end there).
  uint64_t Needed(uint64_t index) const {
    return std::min<uint64_t>(bs_, layout().virtual_size - Block(index) * bs_);
  }

  Status ReadsZero(uint64_t offset, uint64_t length, bool* zero) {
    *zero = true;
    for (uint64_t done = 0; done < length && *zero; done += kCompactChunk) {
      const uint64_t n = std::min(kCompactChunk, length - done);
      VSTACK_RETURN_IF_ERROR(ReadAt(q_, offset + done, std::span<uint8_t>(buf_).first(n)));
      *zero = IsZero(buf_.data(), n);
    }
    return OkStatus();
  }

  // Present blocks that read as zeros become NOT_PRESENT; ZERO and UNMAPPED blocks let go of
  // their space.
  Status FreeZeroBlocks() {
    std::vector<uint64_t> present;
    img_.bat.ForEachNonZero([&](uint64_t i, uint64_t e) {
      if (layout().IsBitmapIndex(i)) return;
      const uint8_t state = EntryState(e);
      if (state == kFullyPresent) {
        present.push_back(i);
      } else if (EntryOffset(e) != 0) {
        Change(i, MakeEntry(state, 0));
        ++report_.space_released;
      }
    });
    report_.blocks_before = present.size();
    uint64_t scanned = 0;
    for (uint64_t i : present) {
      bool zero = false;
      VSTACK_RETURN_IF_ERROR(ReadsZero(EntryOffset(img_.bat.Get(i)), Needed(i), &zero));
      if (zero) {
        Change(i, MakeEntry(kNotPresent, 0));
        ++report_.zero_blocks_freed;
      }
      progress_(CompactStage::kScan, ++scanned, present.size());
    }
    return CommitChanges();
  }

  // Moves the last blocks of the file into the first holes that hold them: every copy is made
  // and flushed, then one log commit points the entries at the copies.
  Status MoveBlocks() {
    std::vector<Range> used = Structures();
    std::vector<std::pair<Range, uint64_t>> blocks;  // range, BAT index
    img_.bat.ForEachNonZero([&](uint64_t i, uint64_t e) {
      if (layout().IsBitmapIndex(i)) {
        if (EntryState(e) == kBitmapPresent)
          used.push_back({EntryOffset(e), EntryOffset(e) + kMiB});
      } else if (EntryState(e) == kFullyPresent) {
        blocks.push_back({{EntryOffset(e), EntryOffset(e) + bs_}, i});
      }
    });
    std::sort(blocks.begin(), blocks.end(),
              [](auto& a, auto& b) { return a.first.start < b.first.start; });
    for (const auto& b : blocks) used.push_back(b.first);
    std::sort(used.begin(), used.end(), [](auto& a, auto& b) { return a.start < b.start; });
    std::vector<Range> holes;
    uint64_t cursor = 0;
    for (const Range& r : used) {
      if (r.start > AlignUp(cursor, kMiB)) holes.push_back({AlignUp(cursor, kMiB), r.start});
      cursor = std::max(cursor, r.end);
    }
    struct Move {
      uint64_t from, to, index;
    };
    std::vector<Move> moves;
    size_t h = 0;
    for (size_t j = blocks.size(); j-- > 0;) {
      const auto& [range, index] = blocks[j];
      while (h < holes.size() && holes[h].start < range.start &&
             holes[h].end - holes[h].start < bs_) {
        ++h;
      }
      if (h == holes.size() || holes[h].start + bs_ > range.start) break;
      moves.push_back({range.start, holes[h].start, index});
      holes[h].start += bs_;
    }
    for (const Move& m : moves) {
      const uint64_t length = Needed(m.index);
      for (uint64_t done = 0; done < length; done += kCompactChunk) {
        const uint64_t n = std::min(kCompactChunk, length - done);
        VSTACK_RETURN_IF_ERROR(ReadAt(q_, m.from + done, std::span<uint8_t>(buf_).first(n)));
        VSTACK_RETURN_IF_ERROR(WriteAt(q_, m.to + done, std::span<uint8_t>(buf_).first(n)));
      }
      progress_(CompactStage::kMove, ++report_.blocks_moved, moves.size());
    }
    if (moves.empty()) return OkStatus();
    VSTACK_RETURN_IF_ERROR(FlushQueue(q_));  // the copies, before any entry points at them
    for (const Move& m : moves) Change(m.index, MakeEntry(kFullyPresent, m.to));
    return CommitChanges();
  }

  // Makes the BAT durable, cleans the log and truncates the file behind the last block.
  Status Finish() {
    if (log_) {
      VSTACK_RETURN_IF_ERROR(FlushQueue(q_));
      Header clean = img_.header;
      clean.log_guid = Guid{};
      VSTACK_RETURN_IF_ERROR(WriteHeaders(q_, &img_, clean));
    }
    uint64_t end = 0;
    for (const Range& r : Structures()) end = std::max(end, r.end);
    img_.bat.ForEachNonZero([&](uint64_t i, uint64_t e) {
      if (EntryOffset(e) == 0) return;
      end = std::max(end, EntryOffset(e) + (layout().IsBitmapIndex(i) ? kMiB : uint64_t{bs_}));
    });
    end = AlignUp(end, kMiB);
    if (end >= file_.size_bytes() || !file_.Has(kCapResizable)) return OkStatus();
    return file_.Resize(end);
  }

  std::vector<Range> Structures() const {
    const Header& h = img_.header;
    return {
        {0, kMiB},
        {h.log_offset, h.log_offset + h.log_length},
        {img_.bat_region.offset, img_.bat_region.offset + img_.bat_region.length},
        {img_.metadata_region.offset, img_.metadata_region.offset + img_.metadata_region.length}};
  }

  void Change(uint64_t index, uint64_t value) {
    img_.bat.Set(index, value);
    changed_pages_.insert(index / kEntriesPerPage);
  }

  // Logs the changed BAT pages (as many per entry as the log allows), writing each entry's
  // pages in place once it is durable.
  Status CommitChanges() {
    if (changed_pages_.empty()) return OkStatus();
    if (!log_) {
      Header h = img_.header;
      h.file_write = Guid::Random();
      h.log_guid = Guid::Random();
      VSTACK_RETURN_IF_ERROR(WriteHeaders(q_, &img_, h));
      log_.emplace(img_, report_.file_size_before);
    }
    std::vector<LogPage> pages;
    auto commit = [&]() -> Status {
      VSTACK_ASSIGN_OR_RETURN(LogWriter::Written written,
                              log_->Append(q_, pages, file_.size_bytes(), {}));
      (void)written;
      ++report_.log_entries;
      for (const LogPage& p : pages) VSTACK_RETURN_IF_ERROR(WriteAt(q_, p.file_offset, p.data));
      pages.clear();
      return OkStatus();
    };
    for (uint64_t page : changed_pages_) {
      LogPage p;
      p.file_offset = img_.bat_region.offset + page * kLogSector;
      for (uint64_t i = 0; i < kEntriesPerPage && page * kEntriesPerPage + i < layout().entries;
           ++i) {
        StoreLE64(p.data.data() + 8 * i, img_.bat.Get(page * kEntriesPerPage + i));
      }
      pages.push_back(p);
      if (pages.size() == log_->max_pages()) VSTACK_RETURN_IF_ERROR(commit());
    }
    if (!pages.empty()) VSTACK_RETURN_IF_ERROR(commit());
    changed_pages_.clear();
    return OkStatus();
  }

  BlockDevice& file_;
  IoQueue& q_;
  VhdxImage img_;
  const CompactProgress& progress_;
  const uint64_t bs_;
  std::vector<uint8_t> buf_;
  std::set<uint64_t> changed_pages_;
  std::optional<LogWriter> log_;
  CompactReport report_;
};

}  // namespace

Result<CompactReport> CompactImage(BlockDevice& file, const CompactProgress& progress) {
  if (file.read_only()) {
    return MakeError(Errc::kReadOnly, "VHDX compact: the image is opened read-only");
  }
  SyncIo io(file);
  IoQueue* q = io.queue();
  if (q == nullptr) return io.open_error();
  VSTACK_ASSIGN_OR_RETURN(VhdxImage image,
                          LoadImage(file, *q, /*writable=*/true, /*lenient=*/false));
  // A log the open had to keep (no space below) is replayed in place before compaction
  // starts a log of its own, or compaction does not start.
  VSTACK_RETURN_IF_ERROR(SettleLog(file, *q, &image));
  if (image.metadata.leave_blocks_allocated) {
    return MakeError(Errc::kNotSupported,
                     "VHDX compact: only dynamic images can be compacted; this one is fixed");
  }
  return Compactor(file, *q, std::move(image), progress).Run();
}

static const bool registered [[maybe_unused]] = RegisterCompactor("vhdx", &CompactImage);

}  // namespace vstack::vhdx
