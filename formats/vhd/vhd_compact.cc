#include "formats/vhd/vhd_compact.h"

#include <algorithm>
#include <cstring>

#include "formats/vhd/vhd_bat.h"
#include "formats/vhd/vhd_bitmap.h"
#include "formats/vhd/vhd_image.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/sync_io.h"

namespace vstack::vhd {
namespace {

struct Range {
  uint64_t start, end;
  uint32_t index;  // BAT index (blocks only)
};

class Compactor {
 public:
  Compactor(BlockDevice& file, VhdImage img, const CompactProgress& progress)
      : file_(file),
        io_(file),
        img_(std::move(img)),
        progress_(progress),
        bm_(img_.header.bitmap_bytes()),
        bs_(img_.header.block_size),
        block_bytes_(uint64_t{bm_} + bs_),
        buf_(block_bytes_, 4096) {}

  Result<CompactReport> Run() {
    report_.file_size_before = file_.size_bytes();
    std::vector<uint32_t> allocated;
    for (uint32_t i = 0; i < img_.bat.size(); ++i) {
      if (img_.bat[i] != kUnallocated) allocated.push_back(i);
    }
    report_.blocks_before = allocated.size();
    VSTACK_RETURN_IF_ERROR(FreeZeroBlocks(allocated));
    VSTACK_RETURN_IF_ERROR(MoveBlocks());
    VSTACK_RETURN_IF_ERROR(Truncate());
    report_.file_size_after = file_.size_bytes();
    return report_;
  }

 private:
  uint64_t At(uint32_t index) const { return uint64_t{img_.bat[index]} * kSectorSize; }

  Status Io(std::error_code ec, const std::string& what, uint64_t offset) {
    if (!ec) return OkStatus();
    return MakeError(ec, "VHD compact: " + what + " at offset " + std::to_string(offset) +
                             " failed: " + ec.message());
  }
  Status ReadBlock(uint64_t at) { return Io(io_.Read(at, buf_.span()), "reading a block", at); }
  Status Flush() { return Io(io_.Flush(), "flush", 0); }
  Status WriteBatSector(uint32_t index) {
    const uint64_t sector = index / kEntriesPerBatSector;
    AlignedBuffer out(kSectorSize, 4096);
    SerializeBatSector(
        img_.bat, sector,
        std::span<uint8_t, kSectorSize>(reinterpret_cast<uint8_t*>(out.data()), kSectorSize));
    const uint64_t at = img_.header.table_offset + sector * kSectorSize;
    return Io(io_.Write(at, out.span()), "writing the BAT", at);
  }

  // A block can be given back if doing so changes nothing a reader sees. In a dynamic image,
  // when it reads as zeros: no sector with its bit set holds a non-zero byte. In a
  // differencing image, only when no sector's bit is set: a sector of zeros the child wrote
  // hides the parent's data there, and freeing the block would show the parent's again.
  bool Freeable() const { return img_.footer.is_differencing() ? NoSectorPresent() : ReadsZero(); }
  bool NoSectorPresent() const {
    const auto* bits = reinterpret_cast<const uint8_t*>(buf_.data());
    const uint32_t sectors = bs_ / kSectorSize;
    return !TestBit(bits, 0) && RunLength(bits, 0, sectors) == sectors;
  }
  bool ReadsZero() const {
    const auto* bits = reinterpret_cast<const uint8_t*>(buf_.data());
    const std::byte* data = buf_.data() + bm_;
    const uint32_t sectors = bs_ / kSectorSize;
    for (uint32_t s = 0; s < sectors;) {
      const uint32_t n = RunLength(bits, s, sectors);
      if (TestBit(bits, s) &&
          !IsZero(data + uint64_t{s} * kSectorSize, uint64_t{n} * kSectorSize)) {
        return false;
      }
      s += n;
    }
    return true;
  }

  Status FreeZeroBlocks(const std::vector<uint32_t>& allocated) {
    std::vector<uint32_t> freed;
    uint64_t scanned = 0;
    for (uint32_t i : allocated) {
      VSTACK_RETURN_IF_ERROR(ReadBlock(At(i)));
      if (Freeable()) freed.push_back(i);
      progress_(CompactStage::kScan, ++scanned, allocated.size());
    }
    for (uint32_t i : freed) img_.bat[i] = kUnallocated;
    uint64_t last_sector = UINT64_MAX;
    for (uint32_t i : freed) {
      if (i / kEntriesPerBatSector == last_sector) continue;
      last_sector = i / kEntriesPerBatSector;
      VSTACK_RETURN_IF_ERROR(WriteBatSector(i));
    }
    report_.zero_blocks_freed = freed.size();
    if (!freed.empty()) VSTACK_RETURN_IF_ERROR(Flush());
    return OkStatus();
  }

  // Moves the last blocks of the file into the first holes that fit them.
  Status MoveBlocks() {
    std::vector<Range> used = {{0, img_.metadata_end, 0}};
    const DynamicHeader& h = img_.header;
    used.push_back({img_.footer.data_offset, img_.footer.data_offset + kHeaderSize, 0});
    used.push_back({h.table_offset, h.table_offset + h.bat_bytes(), 0});
    std::vector<Range> blocks;
    for (uint32_t i = 0; i < img_.bat.size(); ++i) {
      if (img_.bat[i] != kUnallocated) blocks.push_back({At(i), At(i) + block_bytes_, i});
    }
    std::sort(blocks.begin(), blocks.end(), [](auto& a, auto& b) { return a.start < b.start; });
    std::vector<Range> all = used;
    all.insert(all.end(), blocks.begin(), blocks.end());
    std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.start < b.start; });
    std::vector<Range> holes;
    uint64_t cursor = 0;
    for (const Range& r : all) {
      if (r.start > cursor) holes.push_back({cursor, r.start, 0});
      cursor = std::max(cursor, r.end);
    }
    // Plan every move first, so that the move stage knows its total.
    struct Move {
      uint64_t from, to;
      uint32_t index;
    };
    // A hole takes its blocks with their data 4 KiB-aligned (PlaceBlock) unless packing them
    // back to back fits more of them and leaves no leak where aligned ones would: a hole left
    // by blocks qemu packed (2 MiB + 512 bytes apart) holds 10 packed but 9 aligned, and the
    // 10th's room was a leak no later compact or check could give back; a hole left by
    // aligned blocks (vstack's, 4 KiB apart) holds as many aligned with nothing over, and
    // packing one more in left a leak smaller than a block (what check reports: 8 KiB or
    // more between blocks).
    constexpr uint64_t kLeak = 2 * kDataAlignment;
    std::vector<bool> packed(holes.size());
    for (size_t h = 0; h < holes.size(); ++h) {
      uint64_t aligned = 0, aligned_end = holes[h].start;
      for (uint64_t at = holes[h].start; PlaceBlock(at, bm_) + block_bytes_ <= holes[h].end;
           at = aligned_end) {
        aligned_end = PlaceBlock(at, bm_) + block_bytes_;
        ++aligned;
      }
      const uint64_t size = holes[h].end - holes[h].start;
      const uint64_t fit = size / block_bytes_;
      const bool aligned_leaks = holes[h].end - aligned_end >= kLeak;
      const bool packed_leaks = size - fit * block_bytes_ >= kLeak;
      packed[h] = aligned < fit && (aligned_leaks || !packed_leaks);
    }
    std::vector<Move> moves;
    size_t g = 0;
    for (size_t j = blocks.size(); j-- > 0;) {
      const Range& b = blocks[j];
      uint64_t pos = 0;
      while (g < holes.size() && holes[g].start < b.start) {
        const uint64_t aligned = PlaceBlock(holes[g].start, bm_);
        if (!packed[g] && aligned + block_bytes_ <= holes[g].end) {
          pos = aligned;
          break;
        }
        if (holes[g].start + block_bytes_ <= holes[g].end) {
          pos = holes[g].start;
          break;
        }
        ++g;
      }
      if (g >= holes.size() || holes[g].start >= b.start || pos + block_bytes_ > b.start) break;
      moves.push_back({b.start, pos, b.index});
      holes[g].start = pos + block_bytes_;
    }
    for (const Move& m : moves) {
      VSTACK_RETURN_IF_ERROR(ReadBlock(m.from));
      VSTACK_RETURN_IF_ERROR(Io(io_.Write(m.to, buf_.span()), "copying a block", m.to));
      VSTACK_RETURN_IF_ERROR(Flush());
      img_.bat[m.index] = static_cast<uint32_t>(m.to / kSectorSize);
      VSTACK_RETURN_IF_ERROR(WriteBatSector(m.index));
      VSTACK_RETURN_IF_ERROR(Flush());
      ++report_.blocks_moved;
      progress_(CompactStage::kMove, report_.blocks_moved, moves.size());
    }
    return OkStatus();
  }

  // Writes the footer right after the last structure, then shrinks the file.
  Status Truncate() {
    if (!img_.growable) return OkStatus();
    uint64_t end = img_.metadata_end;
    for (uint32_t i = 0; i < img_.bat.size(); ++i) {
      if (img_.bat[i] != kUnallocated) end = std::max(end, At(i) + block_bytes_);
    }
    end = (end + kSectorSize - 1) / kSectorSize * kSectorSize;
    if (end >= img_.footer_offset) return OkStatus();
    AlignedBuffer footer(kFooterSize, 4096);
    std::memcpy(footer.data(), img_.footer_bytes.data(), kFooterSize);
    VSTACK_RETURN_IF_ERROR(Io(io_.Write(end, footer.span()), "writing the footer", end));
    VSTACK_RETURN_IF_ERROR(Flush());
    return file_.Resize(end + kFooterSize);
  }

  BlockDevice& file_;
  SyncIo io_;
  VhdImage img_;
  const CompactProgress& progress_;
  const uint32_t bm_, bs_;
  const uint64_t block_bytes_;
  AlignedBuffer buf_;
  CompactReport report_;
};

}  // namespace

Result<CompactReport> CompactImage(BlockDevice& file, const CompactProgress& progress) {
  VSTACK_ASSIGN_OR_RETURN(VhdImage img, LoadImage(file, /*lenient=*/false));
  if (!img.is_dynamic()) {
    return MakeError(Errc::kNotSupported,
                     "VHD compact: only dynamic images can be compacted; "
                     "this one is fixed");
  }
  if (img.CountFindings(Finding::kCorruption) > 0) {
    return MakeError(Errc::kCorruption, "VHD compact: the image has errors (" +
                                            img.findings.front().message +
                                            "); run `vstack check -r all` first");
  }
  return Compactor(file, std::move(img), progress).Run();
}

static const bool registered [[maybe_unused]] = RegisterCompactor("vhd", &CompactImage);

}  // namespace vstack::vhd
