// VhdDevice::Check: `vstack check` for VHD images. It reloads the metadata from the device
// leniently (every finding, see vhd_image.h), reports it, and with a repair mode fixes what
// can be fixed without losing data, in an order that keeps the image valid at every step:
// footers and header first, then BAT entries that point at nothing (each BAT sector written
// once, so the repair is linear in the table size), a flush, and only then the trailing leaked
// space (footer moved down, flush, file truncated). Space that any BAT entry points into,
// valid or not, is never leaked space (vhd_image.cc), so no repair frees it.
#include <algorithm>
#include <cstring>

#include "formats/vhd/vhd_bat.h"
#include "formats/vhd/vhd_chain.h"
#include "formats/vhd/vhd_device.h"
#include "formats/vhd/vhd_dynamic.h"
#include "lib/aligned_buffer.h"
#include "lib/plural.h"
#include "lib/spec.h"
#include "lib/sync_io.h"

namespace vstack::vhd {
namespace {

bool Allowed(Repair r, CheckMode mode) {
  if (r == Repair::kNone || mode == CheckMode::kReadOnly) return false;
  if (r == Repair::kTruncateTail) return true;  // leaks: both repair modes
  return mode == CheckMode::kRepairAll;
}

Status WriteAt(SyncIo& io, uint64_t offset, const void* data, size_t len) {
  AlignedBuffer buf(len, 4096);
  std::memcpy(buf.data(), data, len);
  if (std::error_code ec = io.Write(offset, buf.span())) {
    return MakeError(ec, "VHD repair: cannot write " + std::to_string(len) + " bytes at offset " +
                             std::to_string(offset) + ": " + ec.message());
  }
  return OkStatus();
}

Status Flush(SyncIo& io) {
  if (std::error_code ec = io.Flush()) {
    return MakeError(ec, "VHD repair: flush failed: " + ec.message());
  }
  return OkStatus();
}

// Applies one repair (not kTruncateTail) to the image on `lower`.
Status Apply(BlockDevice& lower, SyncIo& io, VhdImage& img, const Finding& f) {
  switch (f.repair) {
    case Repair::kRewriteFooter:
    case Repair::kRewriteEndFooter:
    case Repair::kExtendFile: {
      std::array<uint8_t, kFooterSize> bytes{};
      SerializeFooter(img.footer, bytes);
      // Past every block the end cut (the file is extended to hold them, Repair::kExtendFile):
      // a footer at the old end would land inside the last of them.
      const uint64_t end = std::max(img.footer_offset, img.extend_to);
      const uint64_t at = (end + kSectorSize - 1) / kSectorSize * kSectorSize;
      if (at + kFooterSize > lower.size_bytes()) {
        VSTACK_RETURN_IF_ERROR(lower.Resize(at + kFooterSize));
      }
      VSTACK_RETURN_IF_ERROR(WriteAt(io, at, bytes.data(), kFooterSize));
      if (f.repair == Repair::kRewriteFooter && img.is_dynamic()) {
        VSTACK_RETURN_IF_ERROR(WriteAt(io, 0, bytes.data(), kFooterSize));
      }
      return OkStatus();
    }
    case Repair::kRewriteCopy: {
      std::array<uint8_t, kFooterSize> bytes{};
      SerializeFooter(img.footer, bytes);
      return WriteAt(io, 0, bytes.data(), kFooterSize);
    }
    case Repair::kRewriteHeader: {
      std::array<uint8_t, kHeaderSize> bytes{};
      SerializeHeader(img.header, bytes);
      return WriteAt(io, img.footer.data_offset, bytes.data(), kHeaderSize);
    }
    default:
      return OkStatus();
  }
}

// Clears the BAT entries in img.clear_entries (blocks wholly past the end of the file), one
// write per BAT sector they are in.
Status ClearEntries(SyncIo& io, VhdImage& img) {
  for (uint32_t i : img.clear_entries) img.bat[i] = kUnallocated;
  uint64_t last = UINT64_MAX;
  for (uint32_t i : img.clear_entries) {  // ascending: the load found them in BAT order
    const uint64_t sector = i / kEntriesPerBatSector;
    if (sector == last) continue;
    last = sector;
    std::array<uint8_t, kSectorSize> bytes{};
    SerializeBatSector(img.bat, sector, bytes);
    VSTACK_RETURN_IF_ERROR(
        WriteAt(io, img.header.table_offset + sector * kSectorSize, bytes.data(), kSectorSize));
  }
  return OkStatus();
}

// Moves the end footer down to the end of the last structure, then truncates the file.
Status TruncateTail(BlockDevice& lower, SyncIo& io, const VhdImage& img) {
  const uint64_t at = (img.data_end + kSectorSize - 1) / kSectorSize * kSectorSize;
  std::array<uint8_t, kFooterSize> bytes{};
  SerializeFooter(img.footer, bytes);
  VSTACK_RETURN_IF_ERROR(WriteAt(io, at, bytes.data(), kFooterSize));
  VSTACK_RETURN_IF_ERROR(Flush(io));
  return lower.Resize(at + kFooterSize);
}

void Report(const VhdImage& img, const std::string& below, CheckResult* out) {
  for (const Finding& f : img.findings) {
    switch (f.kind) {
      case Finding::kCorruption:
        out->Corruption(f.message + (f.repair == Repair::kNone ? "" : " (repairable with -r all)"));
        break;
      case Finding::kLeak:
        out->Leak(f.message);
        break;
      case Finding::kWarning:
        out->messages.push_back("Warning " + f.message);
        break;
    }
  }
  // Findings beyond the stored ones are counted, not listed (memory stays bounded).
  const uint64_t more = img.omitted[Finding::kCorruption] + img.omitted[Finding::kLeak] +
                        img.omitted[Finding::kWarning];
  if (more > 0) {
    out->corruptions += img.omitted[Finding::kCorruption];
    out->leaks += img.omitted[Finding::kLeak];
    out->messages.push_back("... and " + std::to_string(more) + " more finding(s) not listed (" +
                            std::to_string(img.omitted[Finding::kCorruption]) + " error(s), " +
                            std::to_string(img.omitted[Finding::kLeak]) + " leak(s))");
  }
  // Corrupt entries that stay: repairing them could lose data, so say how to save it.
  const size_t kept = img.unusable.size() - img.clear_entries.size() - img.cut_blocks;
  if (kept > 0) {
    out->messages.push_back(
        "Not repaired: " + std::to_string(kept) +
        " BAT entr(ies) whose blocks overlap other structures or run past the end of a device "
        "that cannot grow (repairing them could lose data). Copy the data out, reading those blocks as they "
        "are: vstack convert -O vhd 'vhd:recover=on+" +
        below + "' NEW.vhd");
  }
}

}  // namespace

Status VhdDevice::Check(CheckMode mode, CheckResult* out) {
  if (parent_) {
    // The chain below, read-only (parents are never repaired through a child).
    CheckResult below;
    VSTACK_RETURN_IF_ERROR(parent_->Check(CheckMode::kReadOnly, &below));
    const std::string name = "parent '" + DevicePath(*parent_->lower()) + "': ";
    for (const std::string& m : below.messages) out->messages.push_back(name + m);
    out->corruptions += below.corruptions;
    out->leaks += below.leaks;
  }
  BlockDevice& lower = lower_device();
  const std::string below = DevicePath(lower).empty()
                                ? lower.kind() + ":..."
                                : FormatSpecPart(SpecPart{"file", DevicePath(lower), {}});
  VSTACK_ASSIGN_OR_RETURN(VhdImage img, LoadImage(lower, /*lenient=*/true));
  if (mode == CheckMode::kReadOnly || read_only()) {
    Report(img, below, out);
    return OkStatus();
  }
  if (open_queues() > 0) {  // they would keep the state that a repair replaces
    return MakeError(Errc::kBusy, "vhd: cannot repair while " + std::to_string(open_queues()) +
                                      " queue(s) of the image are open (a layer above holds them)");
  }
  SyncIo io(lower);
  bool changed = false;
  if (Allowed(Repair::kExtendFile, mode) && img.cut_blocks > 0) {
    // Findings may be listed or only counted: the extension is one repair for every cut block.
    Finding extend;
    extend.repair = Repair::kExtendFile;
    VSTACK_RETURN_IF_ERROR(Apply(lower, io, img, extend));
    out->messages.push_back(
        "Extended the file from " + std::to_string(img.footer_offset) + " to " +
        std::to_string(lower.size_bytes()) + " bytes to hold " +
        Counted(img.cut_blocks, "block", "blocks") +
        " its end cut: what was cut off reads as zeros (it was lost before this repair)");
  }
  for (const Finding& f : img.findings) {
    if (!Allowed(f.repair, mode) || f.repair == Repair::kTruncateTail) continue;
    if (f.repair != Repair::kClearEntry && f.repair != Repair::kExtendFile) {
      VSTACK_RETURN_IF_ERROR(Apply(lower, io, img, f));
    }
    out->messages.push_back("Repaired " + f.message);
    ++out->repaired;
    changed = true;
  }
  if (Allowed(Repair::kClearEntry, mode) && !img.clear_entries.empty()) {
    VSTACK_RETURN_IF_ERROR(ClearEntries(io, img));
    const uint64_t listed = static_cast<uint64_t>(
        std::count_if(img.findings.begin(), img.findings.end(),
                      [](const Finding& f) { return f.repair == Repair::kClearEntry; }));
    if (img.clear_entries.size() > listed) {
      out->messages.push_back(
          "Repaired " +
          Counted(img.clear_entries.size() - listed, "more BAT entry", "more BAT entries") +
          " pointing past the end of the file");
      out->repaired += img.clear_entries.size() - listed;
    }
    changed = true;
  }
  if (changed) {
    VSTACK_RETURN_IF_ERROR(Flush(io));
    VSTACK_ASSIGN_OR_RETURN(img, LoadImage(lower, /*lenient=*/true));
  }
  for (const Finding& f : img.findings) {
    if (f.repair != Repair::kTruncateTail || !Allowed(f.repair, mode)) continue;
    if (!img.unusable.empty()) {
      // The unused space may be where a damaged entry's block really is: keep it.
      out->messages.push_back(
          "Not repaired: leaked space is kept while BAT entries are corrupt (it may hold the "
          "data of a damaged entry)");
      break;
    }
    VSTACK_RETURN_IF_ERROR(TruncateTail(lower, io, img));
    out->messages.push_back("Repaired " + f.message);
    ++out->repaired;
    changed = true;
    break;
  }
  if (changed) {
    VSTACK_ASSIGN_OR_RETURN(img, LoadImage(lower, /*lenient=*/true));
    image_ = img;
    if (dynamic_) {
      dynamic_ = std::make_unique<DynamicState>(lower, image_, options_.reserve);
      dynamic_->max_cached_bitmaps = options_.max_cached_bitmaps;
    }
  }
  Report(img, below, out);
  return OkStatus();
}

}  // namespace vstack::vhd
