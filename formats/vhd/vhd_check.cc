// VhdDevice::Check: `vstack check` for VHD images. It reloads the metadata from the device
// leniently (every finding, see vhd_image.h), reports it, and with a repair mode fixes what
// can be fixed without losing data, in an order that keeps the image valid at every step:
// footers and header first, then BAT entries that point at nothing, a flush, and only then
// the trailing leaked space (footer moved down, flush, file truncated).
#include <algorithm>
#include <cstring>

#include "formats/vhd/vhd_bat.h"
#include "formats/vhd/vhd_chain.h"
#include "formats/vhd/vhd_device.h"
#include "formats/vhd/vhd_dynamic.h"
#include "lib/aligned_buffer.h"
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
    case Repair::kRewriteEndFooter: {
      std::array<uint8_t, kFooterSize> bytes{};
      SerializeFooter(img.footer, bytes);
      const uint64_t at = (img.footer_offset + kSectorSize - 1) / kSectorSize * kSectorSize;
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
    case Repair::kClearEntry: {
      img.bat[f.index] = kUnallocated;
      Bat bat(img.bat);
      const uint64_t sector = f.index / kEntriesPerBatSector;
      std::array<uint8_t, kSectorSize> bytes{};
      bat.SerializeSector(sector, bytes);
      return WriteAt(io, img.header.table_offset + sector * kSectorSize, bytes.data(), kSectorSize);
    }
    default:
      return OkStatus();
  }
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

void Report(const VhdImage& img, CheckResult* out) {
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
  VSTACK_ASSIGN_OR_RETURN(VhdImage img, LoadImage(lower, /*lenient=*/true));
  if (mode == CheckMode::kReadOnly || read_only()) {
    Report(img, out);
    return OkStatus();
  }
  if (open_queues() > 0) {  // they would keep the state that a repair replaces
    return MakeError(Errc::kBusy, "vhd: cannot repair while " + std::to_string(open_queues()) +
                                      " queue(s) of the image are open (a layer above holds them)");
  }
  SyncIo io(lower);
  bool changed = false;
  for (const Finding& f : img.findings) {
    if (!Allowed(f.repair, mode) || f.repair == Repair::kTruncateTail) continue;
    VSTACK_RETURN_IF_ERROR(Apply(lower, io, img, f));
    out->messages.push_back("Repaired " + f.message);
    ++out->repaired;
    changed = true;
  }
  if (changed) {
    VSTACK_RETURN_IF_ERROR(Flush(io));
    VSTACK_ASSIGN_OR_RETURN(img, LoadImage(lower, /*lenient=*/true));
  }
  for (const Finding& f : img.findings) {
    if (f.repair != Repair::kTruncateTail || !Allowed(f.repair, mode)) continue;
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
  Report(img, out);
  return OkStatus();
}

}  // namespace vstack::vhd
