#include "formats/vhd/vhd_image.h"

#include <algorithm>
#include <cstring>

#include "formats/vhd/vhd_bat.h"
#include "lib/aligned_buffer.h"
#include "lib/sync_io.h"

namespace vstack::vhd {

std::string FooterSourceName(FooterSource s) {
  switch (s) {
    case FooterSource::kEnd:
      return "end";
    case FooterSource::kEndShort:
      return "end (511-byte legacy footer)";
    case FooterSource::kCopyAtZero:
      return "copy at offset 0 (end footer unusable)";
  }
  return "?";
}

void VhdImage::AddFinding(Finding f) {
  if (findings.size() < kMaxStoredFindings) {
    findings.push_back(std::move(f));
  } else {
    ++omitted[f.kind];
  }
}

uint64_t VhdImage::CountFindings(Finding::Kind kind) const {
  return omitted[kind] +
         static_cast<uint64_t>(std::count_if(findings.begin(), findings.end(),
                                             [&](const Finding& f) { return f.kind == kind; }));
}

namespace {

std::string Off(uint64_t v) { return std::to_string(v); }

class Loader {
 public:
  Loader(BlockDevice& device, bool lenient) : device_(device), io_(device), lenient_(lenient) {}

  Result<VhdImage> Run() {
    img_.device_size = device_.size_bytes();
    img_.growable = device_.Has(kCapResizable);
    VSTACK_RETURN_IF_ERROR(FindFooter());
    for (std::string& w : FooterWarnings(img_.footer, img_.footer_offset)) {
      img_.AddFinding({Finding::kWarning, std::move(w)});
    }
    if (img_.footer.is_fixed()) {
      VSTACK_RETURN_IF_ERROR(CheckFixedLayout());
    } else {
      VSTACK_RETURN_IF_ERROR(LoadHeader());
      VSTACK_RETURN_IF_ERROR(LoadBat());
      VSTACK_RETURN_IF_ERROR(CheckDynamicLayout());
    }
    return std::move(img_);
  }

 private:
  // Reads `len` bytes at `offset` (inside the device) into `out`.
  Status Read(uint64_t offset, size_t len, std::vector<uint8_t>* out) {
    AlignedBuffer buf(len, 4096);
    if (std::error_code ec = io_.Read(offset, buf.span())) {
      return MakeError(ec, "VHD: cannot read " + std::to_string(len) + " bytes at offset " +
                               Off(offset) + ": " + ec.message());
    }
    const auto* p = reinterpret_cast<const uint8_t*>(buf.data());
    out->assign(p, p + len);
    return OkStatus();
  }

  // Records a corruption; in a strict load a `fatal` one is the error instead.
  Status Corrupt(bool fatal, Finding f, Errc code = Errc::kCorruption) {
    if (fatal && !lenient_) return MakeError(code, f.message);
    f.kind = Finding::kCorruption;
    img_.AddFinding(std::move(f));
    return OkStatus();
  }

  Status FindFooter() {
    const uint64_t size = img_.device_size;
    if (size < kFooterSize) {
      return MakeError(Errc::kCorruption, "VHD: the image is " + Off(size) +
                                              " bytes, too small for a 512-byte footer");
    }
    const size_t tail_len = static_cast<size_t>(std::min<uint64_t>(size, 2 * kFooterSize));
    const uint64_t tail_at = size - tail_len;
    std::vector<uint8_t> tail;
    VSTACK_RETURN_IF_ERROR(Read(tail_at, tail_len, &tail));

    std::array<uint8_t, kFooterSize> end{};
    uint64_t end_at = size - kFooterSize;
    bool end_cookie = false;
    FooterSource end_source = FooterSource::kEnd;
    if (HasFooterCookie(&tail[tail_len - kFooterSize])) {
      std::memcpy(end.data(), &tail[tail_len - kFooterSize], kFooterSize);
      end_cookie = true;
    } else if (tail_len >= kFooterSize + 1 && HasFooterCookie(&tail[tail_len - 511])) {
      std::memcpy(end.data(), &tail[tail_len - 511], 511);  // the last byte stays zero
      end_at = size - 511;
      end_cookie = true;
      end_source = FooterSource::kEndShort;
    }
    Error end_error;
    if (end_cookie) {
      Result<Footer> f = ParseFooter(end, end_at);
      if (f) {
        img_.footer = *f;
        img_.footer_bytes = end;
        img_.source = end_source;
        img_.footer_offset = end_at;
        if (img_.footer.is_dynamic()) CompareCopy(end);
        return OkStatus();
      }
      end_error = f.error();
      if (end_error.code == make_error_code(Errc::kNotSupported)) return end_error;
    } else {
      end_error = MakeError(Errc::kCorruption, "VHD: no footer ('conectix' cookie) at offset " +
                                                   Off(end_at) + " (the end of the file)");
    }

    // The spec's fallback for dynamic disks: the copy at offset 0.
    std::string copy_problem = "no dynamic-disk footer copy at offset 0";
    if (size >= 2 * kFooterSize) {
      std::vector<uint8_t> head;
      VSTACK_RETURN_IF_ERROR(Read(0, kFooterSize, &head));
      std::array<uint8_t, kFooterSize> copy{};
      std::memcpy(copy.data(), head.data(), kFooterSize);
      if (HasFooterCookie(copy.data())) {
        Result<Footer> f = ParseFooter(copy, 0);
        if (f && f->is_dynamic()) {
          img_.footer = *f;
          img_.footer_bytes = copy;
          img_.source = FooterSource::kCopyAtZero;
          // A damaged footer keeps its slot; a missing one (a torn tail) goes after everything.
          img_.footer_offset = end_cookie || !img_.growable ? end_at : size;
          img_.AddFinding({Finding::kCorruption,
                           end_error.message + "; using the footer copy at offset 0",
                           Repair::kRewriteEndFooter});
          return OkStatus();
        }
        if (!f) copy_problem = f.error().message;
        if (f && !f->is_dynamic()) copy_problem = "the copy at offset 0 is not a dynamic disk's";
      }
    }
    // Opened for check: a footer whose only fault is its checksum can still be used.
    if (lenient_ && end_cookie && end_error.code == make_error_code(Errc::kChecksumMismatch)) {
      Result<Footer> f = ParseFooter(end, end_at, /*verify_checksum=*/false);
      if (f) {
        img_.footer = *f;
        SerializeFooter(*f, img_.footer_bytes);
        img_.source = end_source;
        img_.footer_offset = end_at;
        img_.AddFinding({Finding::kCorruption, end_error.message, Repair::kRewriteFooter});
        if (img_.footer.is_dynamic()) CompareCopy(img_.footer_bytes);
        return OkStatus();
      }
    }
    return MakeError(end_error.code, end_error.message + "; " + copy_problem);
  }

  // Records whether the dynamic disk's copy at offset 0 matches `end`.
  void CompareCopy(const std::array<uint8_t, kFooterSize>& end) {
    std::vector<uint8_t> head;
    if (img_.device_size < 2 * kFooterSize || !Read(0, kFooterSize, &head)) {
      img_.AddFinding(
          {Finding::kCorruption, "VHD footer copy at offset 0 is missing", Repair::kRewriteCopy});
      return;
    }
    if (std::memcmp(head.data(), end.data(), kFooterSize) == 0) return;
    std::array<uint8_t, kFooterSize> copy{};
    std::memcpy(copy.data(), head.data(), kFooterSize);
    Result<Footer> f = ParseFooter(copy, 0);
    img_.AddFinding({Finding::kCorruption,
                     f ? "VHD footer copy at offset 0 differs from the footer at offset " +
                             Off(img_.footer_offset)
                       : f.error().message,
                     Repair::kRewriteCopy});
  }

  Status CheckFixedLayout() {
    const uint64_t data = img_.footer.current_size / kSectorSize * kSectorSize;
    if (img_.footer_offset < data) {
      return MakeError(Errc::kCorruption,
                       "VHD: fixed disk truncated: current size " + Off(img_.footer.current_size) +
                           " (field at offset " + Off(img_.footer_offset + 48) +
                           ") needs the footer at offset " + Off(data) +
                           ", but the file ends with it at offset " + Off(img_.footer_offset));
    }
    if (img_.footer_offset > data) {
      img_.AddFinding({Finding::kWarning, "VHD: " + Off(img_.footer_offset - data) +
                                              " unused bytes between the data (ending at offset " +
                                              Off(data) + ") and the footer"});
    }
    return OkStatus();
  }

  Status LoadHeader() {
    const uint64_t at = img_.footer.data_offset;
    if (at > img_.footer_offset || img_.footer_offset - at < kHeaderSize) {
      return MakeError(Errc::kCorruption,
                       "VHD: dynamic header offset " + Off(at) + " (field at offset " +
                           Off(img_.footer_offset + 16) +
                           "): the 1024-byte header would overlap the footer at offset " +
                           Off(img_.footer_offset));
    }
    std::vector<uint8_t> raw;
    VSTACK_RETURN_IF_ERROR(Read(at, kHeaderSize, &raw));
    std::span<const uint8_t, kHeaderSize> bytes(raw.data(), kHeaderSize);
    Result<DynamicHeader> h = ParseHeader(bytes, at);
    if (!h && h.error().code == make_error_code(Errc::kChecksumMismatch)) {
      VSTACK_RETURN_IF_ERROR(
          Corrupt(true, {Finding::kCorruption, h.error().message, Repair::kRewriteHeader},
                  Errc::kChecksumMismatch));
      h = ParseHeader(bytes, at, /*verify_checksum=*/false);
    }
    if (!h) return std::move(h).error();
    img_.header = *h;
    return OkStatus();
  }

  Status LoadBat() {
    const DynamicHeader& h = img_.header;
    const uint64_t hdr = img_.footer.data_offset;
    const uint64_t t = h.table_offset;
    const uint64_t len = h.bat_bytes();
    const std::string field = " (field at offset " + Off(hdr + 16) + ")";
    if (t < kFooterSize || (t < hdr + kHeaderSize && hdr < t + std::max<uint64_t>(len, 1))) {
      return MakeError(Errc::kCorruption, "VHD: BAT offset " + Off(t) + field +
                                              " overlaps the footer copy or the header");
    }
    if (t > img_.footer_offset || len > img_.footer_offset - t) {
      return MakeError(Errc::kCorruption,
                       "VHD: max_table_entries " + std::to_string(h.max_table_entries) +
                           " (field at offset " + Off(hdr + 28) + ") needs a " + Off(len) +
                           "-byte BAT at offset " + Off(t) +
                           ", which runs past the footer at offset " + Off(img_.footer_offset));
    }
    const uint64_t data = img_.footer.current_size / kSectorSize * kSectorSize;
    img_.blocks_needed = (data + h.block_size - 1) / h.block_size;
    if (h.max_table_entries < img_.blocks_needed) {
      return MakeError(Errc::kCorruption,
                       "VHD: max_table_entries " + std::to_string(h.max_table_entries) +
                           " (field at offset " + Off(hdr + 28) + ") is too small for a " +
                           Off(data) + "-byte disk with " + Off(h.block_size) +
                           "-byte blocks, which needs " + Off(img_.blocks_needed));
    }
    // More entries than the disk needs are tolerated (blktap reserves some for a resize) up to
    // what a 2040 GiB disk of 2 MiB blocks has; the rest of the table describes nothing.
    const uint64_t allowed = std::max((img_.blocks_needed + kEntriesPerBatSector - 1) /
                                          kEntriesPerBatSector * kEntriesPerBatSector,
                                      kMaxDynamicSize / kDefaultBlockSize);
    if (h.max_table_entries > allowed) {
      return MakeError(Errc::kCorruption,
                       "VHD: max_table_entries " + std::to_string(h.max_table_entries) +
                           " (field at offset " + Off(hdr + 28) + ") is more than a " + Off(data) +
                           "-byte disk with " + Off(h.block_size) + "-byte blocks can use (" +
                           Off(img_.blocks_needed) + " entries; at most " + Off(allowed) +
                           " are accepted)");
    }
    VSTACK_RETURN_IF_ERROR(CheckBatHasData(t, uint64_t{h.max_table_entries} * 4));
    // Read in bounded chunks (the table lies inside the file: reserving it is bounded too).
    img_.bat.reserve(h.max_table_entries);
    constexpr uint64_t kChunk = 1 << 20;
    for (uint64_t done = 0; done < uint64_t{h.max_table_entries} * 4; done += kChunk) {
      const size_t n =
          static_cast<size_t>(std::min(kChunk, uint64_t{h.max_table_entries} * 4 - done));
      std::vector<uint8_t> raw;
      VSTACK_RETURN_IF_ERROR(
          Read(t + done, (n + kSectorSize - 1) / kSectorSize * kSectorSize, &raw));
      DecodeBat(std::span<const uint8_t>(raw.data(), n), &img_.bat);
    }
    return OkStatus();
  }

  // A BAT that is a hole in the file reads as entries of 0, which point every block at the
  // footer copy: refused before it is read, so a sparse file cannot make the load read (and
  // keep) gigabytes of zeros. Devices that cannot map their extents are read as they are.
  Status CheckBatHasData(uint64_t at, uint64_t len) {
    if (len == 0 || !device_.Has(kCapExtents)) return OkStatus();
    std::vector<Extent> extents;
    if (!device_.MapExtents(at, (len + kSectorSize - 1) / kSectorSize * kSectorSize, &extents)) {
      return OkStatus();
    }
    for (const Extent& e : extents) {
      if ((e.flags & kExtentHole) == 0) continue;
      return MakeError(Errc::kCorruption,
                       "VHD: the BAT at offset " + Off(at) + " is a hole in the file from offset " +
                           Off(e.offset) + " (" + Off(e.length) +
                           " bytes): its entries read as 0, which points their blocks at the "
                           "footer copy");
    }
    return OkStatus();
  }

  // A byte range of the file that a structure occupies.
  struct Region {
    uint64_t start, end;
    int64_t index;  // BAT index, or -1 for metadata
  };
  static bool ByStart(const Region& a, const Region& b) { return a.start < b.start; }
  // Sorts by start. Blocks usually lie in the order of their BAT entries, so the check that
  // they already are comes first.
  static void SortByStart(std::vector<Region>& v) {
    if (!std::is_sorted(v.begin(), v.end(), ByStart)) std::sort(v.begin(), v.end(), ByStart);
  }

  // Corrupt() for one of possibly millions of findings (one per BAT entry): `message()` is
  // called only if the text is used, as the strict load's error or as a stored finding.
  template <typename MakeMessage>
  Status CorruptEntry(MakeMessage message, Repair repair = Repair::kNone, uint32_t index = 0) {
    if (!lenient_) return MakeError(Errc::kCorruption, message());
    img_.AddFinding(Finding::kCorruption, message, repair, index);
    return OkStatus();
  }

  Status CheckDynamicLayout() {
    const DynamicHeader& h = img_.header;
    const uint64_t hdr = img_.footer.data_offset;
    std::vector<Region> meta = {{0, kFooterSize, -1},
                                {hdr, hdr + kHeaderSize, -1},
                                {h.table_offset, h.table_offset + h.bat_bytes(), -1}};
    std::vector<std::string> meta_names = {"the footer copy", "the dynamic header", "the BAT"};
    for (size_t i = 0; i < h.locators.size(); ++i) {
      const ParentLocator& l = h.locators[i];
      if (l.platform_code == 0) continue;
      const uint64_t space =
          l.data_space < kSectorSize ? uint64_t{l.data_space} * kSectorSize : l.data_space;
      const std::string name = "parent locator " + std::to_string(i);
      if (!img_.footer.is_differencing()) {
        img_.AddFinding({Finding::kWarning, "VHD: " + name +
                                                " is set in a dynamic disk (field at offset " +
                                                Off(hdr + 576 + 24 * i) + ")"});
      }
      if (l.data_offset >= kFooterSize && l.data_offset <= img_.footer_offset &&
          space <= img_.footer_offset - l.data_offset) {
        meta.push_back({l.data_offset, l.data_offset + space, -1});
        meta_names.push_back(name + " data");
      }
    }
    img_.metadata_end = 0;
    for (const Region& r : meta) img_.metadata_end = std::max(img_.metadata_end, r.end);

    const uint64_t block_bytes = uint64_t{h.bitmap_bytes()} + h.block_size;
    std::vector<Region> blocks;
    std::vector<Region> referenced;  // where bad entries point, inside the file
    std::vector<bool> bad(img_.bat.size(), false);
    // The words naming entry i, for a finding about it.
    auto entry = [&](uint32_t i) {
      const uint64_t e = img_.bat[i];
      return "BAT entry " + std::to_string(i) + " (field at offset " +
             Off(h.table_offset + 4ull * i) + ") = sector " + std::to_string(e) +
             ": block at offset " + Off(e * kSectorSize);
    };
    for (uint32_t i = 0; i < img_.bat.size(); ++i) {
      const uint32_t e = img_.bat[i];
      if (e == kUnallocated) continue;
      const uint64_t start = uint64_t{e} * kSectorSize, end = start + block_bytes;
      if (end > img_.footer_offset) {
        const bool gone = start >= img_.footer_offset;
        // A block the end cuts (a truncated file): extending the file keeps what is left of it.
        const bool cut = !gone && img_.growable;
        VSTACK_RETURN_IF_ERROR(CorruptEntry(
            [&] {
              return "VHD: " + entry(i) + (gone ? " lies" : " runs") +
                     " past the end of the file (footer at offset " + Off(img_.footer_offset) + ")";
            },
            gone ? Repair::kClearEntry : cut ? Repair::kExtendFile : Repair::kNone, i));
        if (gone) img_.clear_entries.push_back(i);
        if (cut) {
          ++img_.cut_blocks;
          img_.extend_to = std::max(img_.extend_to, end);
        }
        img_.past_end.push_back(i);
        bad[i] = true;
        // The part inside the file may hold the block's data: it is never free space.
        if (!gone) referenced.push_back({start, img_.footer_offset, i});
        continue;
      }
      size_t hit = meta.size();
      for (size_t m = 0; m < meta.size(); ++m) {
        if (start < meta[m].end && meta[m].start < end) {
          hit = m;
          break;
        }
      }
      if (hit < meta.size()) {
        VSTACK_RETURN_IF_ERROR(
            CorruptEntry([&] { return "VHD: " + entry(i) + " overlaps " + meta_names[hit]; }));
        bad[i] = true;
        referenced.push_back({start, end, i});
        continue;
      }
      if ((start + h.bitmap_bytes()) % 4096 != 0) ++img_.unaligned_blocks;
      blocks.push_back({start, end, i});
    }
    SortByStart(blocks);
    for (size_t k = 1; k < blocks.size(); ++k) {
      if (blocks[k].start < blocks[k - 1].end) {
        const auto a = static_cast<uint32_t>(blocks[k - 1].index);
        const auto b = static_cast<uint32_t>(blocks[k].index);
        VSTACK_RETURN_IF_ERROR(CorruptEntry([&] {
          return "VHD: blocks of BAT entries " + std::to_string(a) + " (field at offset " +
                 Off(h.table_offset + 4ull * a) + ") and " + std::to_string(b) +
                 " (field at offset " + Off(h.table_offset + 4ull * b) + ") overlap at offset " +
                 Off(blocks[k].start);
        }));
        bad[a] = bad[b] = true;
      }
    }
    for (uint32_t i = 0; i < bad.size(); ++i) {
      if (bad[i]) img_.unusable.push_back(i);
    }

    // Leaks: space no structure uses, beyond the padding in front of a block (less than
    // 512 + 4096 bytes: the gap over the old footer, and the alignment of the data area).
    // Space that any BAT entry points into, valid or not, is never a leak: repairing a leak
    // frees it, and a corrupt entry's block may still hold the only copy of its data.
    // Every region by start: the sorted lists merged.
    SortByStart(meta);
    SortByStart(referenced);
    std::vector<Region> all = std::move(meta);
    for (const std::vector<Region>* sorted : {&blocks, &referenced}) {
      const auto mid = static_cast<std::ptrdiff_t>(all.size());
      all.insert(all.end(), sorted->begin(), sorted->end());
      std::inplace_merge(all.begin(), all.begin() + mid, all.end(), ByStart);
    }
    uint64_t cursor = 0;
    for (const Region& r : all) {
      if (r.start >= cursor + 2 * kDataAlignment) {
        img_.AddFinding(
            Finding::kLeak,
            [&] {
              // compact moves whole blocks into holes; a smaller hole stays.
              return "VHD: " + Off(r.start - cursor) + " unused bytes at offset " + Off(cursor) +
                     (r.start - cursor >= block_bytes
                          ? " (reclaimed by `vstack compact`)"
                          : " (smaller than a block, which `vstack compact` moves whole: only "
                            "`vstack convert` into a new image reclaims it)");
            },
            Repair::kNone, 0, r.start - cursor);
      }
      cursor = std::max(cursor, r.end);
    }
    img_.data_end = cursor;
    if (img_.growable && img_.footer_offset > cursor) {
      const uint64_t tail = img_.footer_offset - cursor;
      img_.AddFinding({Finding::kLeak,
                       "VHD: " + Off(tail) + " unused bytes at offset " + Off(cursor) +
                           " before the footer at offset " + Off(img_.footer_offset),
                       Repair::kTruncateTail, 0, tail});
    }
    return OkStatus();
  }

  BlockDevice& device_;
  SyncIo io_;
  bool lenient_;
  VhdImage img_;
};

}  // namespace

Result<VhdImage> LoadImage(BlockDevice& device, bool lenient) {
  return Loader(device, lenient).Run();
}

bool ProbeImage(BlockDevice& device, std::string* problem) {
  const uint64_t size = device.size_bytes();
  if (size < kFooterSize || device.geometry().logical_block != kSectorSize) return false;
  SyncIo io(device);
  const size_t tail_len = static_cast<size_t>(std::min<uint64_t>(size, 2 * kFooterSize));
  AlignedBuffer tail(tail_len, 4096);
  if (io.Read(size - tail_len, tail.span())) return false;
  const auto* t = reinterpret_cast<const uint8_t*>(tail.data());
  std::string seen;  // the first invalid footer seen
  auto valid = [&](const uint8_t* p, size_t len, uint64_t at, bool dynamic_only) {
    if (!HasFooterCookie(p)) return false;
    std::array<uint8_t, kFooterSize> f{};
    std::memcpy(f.data(), p, len);
    Result<Footer> footer = ParseFooter(f, at);
    if (footer && (!dynamic_only || footer->is_dynamic())) return true;
    if (!footer && seen.empty()) seen = footer.error().message;
    return false;
  };
  bool found = valid(t + tail_len - kFooterSize, kFooterSize, size - kFooterSize, false) ||
               (tail_len > kFooterSize && valid(t + tail_len - 511, 511, size - 511, false));
  if (!found && size >= 2 * kFooterSize) {
    AlignedBuffer head(kFooterSize, 4096);
    if (!io.Read(0, head.span())) {
      found = valid(reinterpret_cast<const uint8_t*>(head.data()), kFooterSize, 0, true);
    }
  }
  if (!found && problem != nullptr) *problem = seen;
  return found;
}

}  // namespace vstack::vhd
