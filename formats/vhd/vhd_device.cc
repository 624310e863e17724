#include "formats/vhd/vhd_device.h"

#include <algorithm>
#include <ctime>

#include "formats/vhd/vhd_chain.h"
#include "formats/vhd/vhd_dynamic.h"
#include "lib/forwarding_queue.h"
#include "lib/size.h"
#include "lib/sync_io.h"

namespace vstack::vhd {
namespace {

bool CreatorIs(const Footer& f, const char (&code)[5]) {
  return std::equal(f.creator_app.begin(), f.creator_app.end(), code);
}

// The virtual size under `rule` (docs/layers/vhd.md, "Size rule").
uint64_t VirtualSize(const Footer& f, SizeRule rule, std::string* source) {
  const uint64_t current = f.current_size / kSectorSize * kSectorSize;
  const uint64_t chs = f.geometry.TotalSectors() * kSectorSize;
  bool use_chs = false;
  switch (rule) {
    case SizeRule::kCurrent:
      break;
    case SizeRule::kChs:
      use_chs = !f.geometry.IsMax();
      break;
    case SizeRule::kAuto:
      use_chs = !f.geometry.IsMax() && (CreatorIs(f, "vpc ") || CreatorIs(f, "qemu"));
      break;
  }
  if (use_chs && chs > 0 && chs < current) {
    *source = "CHS geometry (creator '" + f.CreatorText() + "')";
    return chs;
  }
  *source = "current_size";
  return current;
}

std::string CreatorVersionText(uint32_t v) {
  return std::to_string(v >> 16) + "." + std::to_string(v & 0xFFFF);
}

std::string FourCc(uint32_t v) {
  std::string s;
  for (int shift = 24; shift >= 0; shift -= 8) {
    const char c = static_cast<char>((v >> shift) & 0xFF);
    s += (c >= 0x20 && c < 0x7F) ? std::string(1, c) : c == 0 ? "\\0" : "?";
  }
  return s;
}

std::string TimeText(uint32_t vhd_seconds) {
  const std::time_t t = static_cast<std::time_t>(vhd_seconds + kVhdEpoch);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::vector<std::string> CounterNames() {
  return {"allocations",       "alloc_commits",    "footer_writes", "bitmap_writes",
          "bat_sector_writes", "metadata_flushes", "bitmap_reads",  "zero_filled_reads",
          "bat_lookups",       "cross_queue_waits", "data_reads",    "parent_reads"};
}

}  // namespace

Result<DevicePtr> VhdDevice::Open(DevicePtr lower, const VhdOptions& options) {
  const Geometry& g = lower->geometry();
  if (g.logical_block != kSectorSize || g.mem_alignment > kSectorSize) {
    return MakeError(Errc::kInvalidArgument,
                     "vhd: VHD structures are 512-byte sectors, but the device below has " +
                         std::to_string(g.logical_block) + "-byte logical blocks and " +
                         std::to_string(g.mem_alignment) +
                         "-byte memory alignment (use block=512, or no direct=on)");
  }
  VSTACK_ASSIGN_OR_RETURN(VhdImage image, LoadImage(*lower, options.for_check));
  DevicePtr parent;
  if (image.footer.is_differencing() && options.open_parent) {
    VSTACK_ASSIGN_OR_RETURN(parent, OpenParent(*lower, image, options));
  }
  return DevicePtr(new VhdDevice(std::move(lower), std::move(image), options, std::move(parent)));
}

VhdDevice::VhdDevice(DevicePtr lower, VhdImage image, const VhdOptions& options,
                     DevicePtr parent)
    : Layer("vhd", std::move(lower)),
      image_(std::move(image)),
      options_(options),
      parent_(std::move(parent)) {
  options_.chain = nullptr;
  Geometry& g = mutable_geometry();
  g.size_bytes = VirtualSize(image_.footer, options.size_rule, &size_source_);
  g.logical_block = kSectorSize;
  DeclareCounters(CounterNames());
  const Capabilities below = lower_device().capabilities();
  if (image_.is_dynamic()) {
    dynamic_ =
        std::make_unique<DynamicState>(lower_device(), image_, options_.reserve, options_.recover);
    dynamic_->parent = parent_.get();
    dynamic_->max_cached_bitmaps = options_.max_cached_bitmaps;
    g.optimal_transfer = image_.header.block_size;
    Capabilities caps = kCapRead | kCapFlush | kCapWriteZeroes | kCapExtents;
    caps |= below & (kCapWrite | kCapPersistent | kCapThreadSafe | kCapFastZeroes);
    if (image_.footer.is_differencing() && !parent_) caps &= ~kCapWrite;  // opened alone
    if (options_.recover) caps &= ~kCapWrite;
    if (parent_) {
      // Zeroing must hide the parent's data: the generic layer writes zeros instead, which
      // sets the bits.
      caps &= ~(kCapWriteZeroes | kCapFastZeroes);
      if (!parent_->Has(kCapThreadSafe)) caps &= ~kCapThreadSafe;
    }
    set_capabilities(caps);
  } else {
    Capabilities caps = below & ~kCapResizable;
    if (options_.recover) caps &= ~kCapWrite;
    set_capabilities(caps);
  }
}

VhdDevice::~VhdDevice() = default;

Result<std::unique_ptr<IoQueue>> VhdDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  if (dynamic_) {
    std::unique_ptr<IoQueue> parent_queue;
    if (parent_) {
      VSTACK_ASSIGN_OR_RETURN(parent_queue, parent_->OpenQueue());
    }
    return NewDynamicQueue(*this, *dynamic_, std::move(lower), std::move(parent_queue));
  }
  // A fixed disk stores the virtual disk at offset 0 of the file: requests go down unchanged
  // (the virtual size ends before the footer, so none can reach it).
  return std::unique_ptr<IoQueue>(new ForwardingQueue(*this, std::move(lower)));
}

Status VhdDevice::CloseLayer() {
  // Every completed write already has its metadata written; make it durable, as a guest
  // shutting down would.
  if (parent_) VSTACK_RETURN_IF_ERROR(parent_->Close());
  if (read_only()) return OkStatus();
  if (dynamic_) VSTACK_RETURN_IF_ERROR(dynamic_->RewriteStaleBat());
  if (dynamic_) VSTACK_RETURN_IF_ERROR(dynamic_->TrimReservation());
  SyncIo io(lower_device());
  if (std::error_code ec = io.Flush()) {
    return MakeError(ec, "vhd: flush at close failed: " + ec.message());
  }
  return OkStatus();
}

std::string VhdDevice::Describe() const {
  std::string s =
      "vhd " + DiskTypeName(image_.footer.disk_type) + ", " + FormatSize(geometry().size_bytes);
  if (image_.is_dynamic()) s += ", " + FormatSize(image_.header.block_size) + " blocks";
  return s;
}

void VhdDevice::Properties(PropertyList& out) const {
  const Footer& f = image_.footer;
  out.push_back({"type", DiskTypeName(f.disk_type), ""});
  out.push_back({"virtual_size", geometry().size_bytes, "bytes"});
  out.push_back({"size_source", size_source_, ""});
  out.push_back({"current_size", f.current_size, "bytes"});
  out.push_back({"original_size", f.original_size, "bytes"});
  out.push_back({"geometry_chs",
                 std::to_string(f.geometry.cylinders) + "/" + std::to_string(f.geometry.heads) +
                     "/" + std::to_string(f.geometry.sectors),
                 ""});
  out.push_back({"geometry_size", f.geometry.TotalSectors() * kSectorSize, "bytes"});
  out.push_back({"creator_app", f.CreatorText(), ""});
  out.push_back({"creator_version", CreatorVersionText(f.creator_version), ""});
  out.push_back({"creator_os", FourCc(f.creator_os), ""});
  out.push_back({"created", TimeText(f.timestamp), ""});
  out.push_back({"uuid", UuidText(f.uuid), ""});
  out.push_back({"saved_state", f.saved_state != 0, ""});
  out.push_back({"footer", FooterSourceName(image_.source), ""});
  std::string checksums = "valid";
  for (const Finding& fi : image_.findings) {
    if (fi.repair == Repair::kRewriteFooter || fi.repair == Repair::kRewriteEndFooter ||
        fi.repair == Repair::kRewriteHeader || fi.repair == Repair::kRewriteCopy) {
      checksums = "problems found: run vstack check";
    }
  }
  out.push_back({"checksums", checksums, ""});
  out.push_back({"file_size", lower_device().size_bytes(), "bytes"});
  if (dynamic_) {
    const uint32_t allocated = dynamic_->bat.CountAllocated();
    out.push_back({"block_size", uint64_t{image_.header.block_size}, "bytes"});
    out.push_back({"bat_entries", uint64_t{image_.header.max_table_entries}, ""});
    out.push_back({"bat_offset", image_.header.table_offset, ""});
    out.push_back({"allocated_blocks", uint64_t{allocated}, ""});
    out.push_back({"allocated_bytes", uint64_t{allocated} * image_.header.block_size, "bytes"});
    out.push_back({"blocks_not_4k_aligned", image_.unaligned_blocks, ""});
    out.push_back({"footer_offset", dynamic_->FooterOffset(), ""});
  }
  if (parent_) {
    out.push_back({"parent_uuid", UuidText(image_.header.parent_uuid), ""});
    out.push_back({"parent_timestamp", TimeText(image_.header.parent_timestamp), ""});
    out.push_back({"parent", parent_->Describe(), ""});
    const std::string path = DevicePath(*parent_->lower());
    if (!path.empty()) out.push_back({"backing_file", path, ""});
    size_t depth = 1;
    for (auto* p = static_cast<const VhdDevice*>(parent_.get()); p->parent_ != nullptr;
         p = static_cast<const VhdDevice*>(p->parent_.get())) {
      ++depth;
    }
    out.push_back({"chain_depth", uint64_t{depth}, ""});
  }
}

Status VhdDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  if (dynamic_) return MapDynamicExtents(*dynamic_, offset, length, out);
  return lower_device().MapExtents(offset, length, out);
}

UnwrittenOrigin VhdDevice::OriginOfUnwritten(uint64_t offset) const {
  const uint64_t rest = size_bytes() - offset;
  if (!dynamic_) return UnwrittenOrigin::Of(lower_device(), offset, rest);
  const uint64_t parent_size = parent_ != nullptr ? parent_->size_bytes() : 0;
  if (offset >= parent_size) return UnwrittenOrigin::Zeros(rest);
  return UnwrittenOrigin::Of(*parent_, offset, std::min(rest, parent_size - offset));
}

Status VhdDevice::MapOwnExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  if (dynamic_) return MapDynamicExtents(*dynamic_, offset, length, out, /*own_only=*/true);
  return lower_device().MapExtents(offset, length, out);
}

}  // namespace vstack::vhd
