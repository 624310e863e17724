// vhd: Microsoft VHD images (fixed and dynamic) as a layer over any device holding the image
// file: `vhd+file:/var/tmp/d.vhd`, `vhd+uring:...`, or a plain path opened by OpenImage. The
// type is read from the footer. docs/layers/vhd.md describes the format, the size rule, the
// write order and its crash guarantees, the counters and the limits.
//
// Spec options: size_rule=auto|current|chs (which size is the virtual size), reserve=64M (how
// far a growing file is extended at once); see the docs.
//
// Fixed disks map offsets one to one. Dynamic disks translate through the BAT, allocate
// blocks on first write with group commit (vhd_dynamic.h), and keep bitmaps exact.
#ifndef VSTACK_FORMATS_VHD_VHD_DEVICE_H_
#define VSTACK_FORMATS_VHD_VHD_DEVICE_H_

#include <memory>
#include <string>
#include <vector>

#include "formats/vhd/vhd_image.h"
#include "lib/layer.h"

namespace vstack::vhd {

struct DynamicState;

// The layer's own counters (DeclareCounters order).
enum VhdCounter : size_t {
  kCounterAllocations,   // blocks allocated
  kCounterCommits,       // allocation commits (each may carry several blocks)
  kCounterFooterWrites,  // end-footer writes (the file grew)
  kCounterBitmapWrites,  // sector-bitmap writes
  kCounterBatWrites,     // 512-byte BAT sector writes
  kCounterMetaFlushes,   // flushes the layer issued for its own write order
  kCounterBitmapReads,   // bitmaps loaded from disk
  kCounterZeroReads,     // read pieces answered with zeros, without I/O
  kCounterBatLookups,    // per-block translations
  kCounterWaits,         // pieces that waited for another queue's metadata I/O
  kCounterDataReads,     // reads served from this image's file (runs of set bits)
  kCounterParentReads,   // differencing: reads sent to the parent (one per run it serves)
  kCounterCount
};

enum class SizeRule { kAuto, kCurrent, kChs };

// How strictly a differencing disk's link to its parent is checked (vhd:parent_check=).
enum class ParentCheck {
  kStrict,  // the parent's footer unique ID and time stamp must match the child's header
  kUuid,    // the unique ID must match; the time stamp may differ (blktap does not check it)
  kOff,     // forced open for recovery: any VHD found is taken as the parent
};

// How a VHD is opened (the spec options of `vhd`, and OpenOptions::for_check).
struct VhdOptions {
  SizeRule size_rule = SizeRule::kAuto;
  // Dynamic disks in a file: when the file must grow, room for this many more bytes of blocks
  // is reserved at once, so the allocations that use it need no flush (docs/layers/vhd.md).
  uint64_t reserve = 64ull << 20;
  // Bitmaps of partially written blocks kept in memory (about 1 KiB each, for 2 MiB blocks).
  size_t max_cached_bitmaps = 16384;
  bool for_check = false;
  // OpenOptions::force_share: the parents are opened without their locks too.
  bool force_share = false;
  // vhd:recover=on: loaded leniently like for_check, but read-only, and corrupt BAT entries
  // are read through rather than failed (vhd_dynamic.h), so that `vstack convert` can copy
  // the data out of an image `vstack check` will not repair.
  bool recover = false;
  // Differencing disks: how the parent link is checked, and an explicit parent stack (a spec,
  // e.g. "vhd+uring:/images/base.vhd") instead of the child's locators.
  ParentCheck parent_check = ParentCheck::kStrict;
  std::string parent_spec;
  // false (vhd:parent=none): a differencing disk opens alone, read-only, its clear sectors
  // reading as zeros (for inspection and `vstack commit`).
  bool open_parent = true;
  // Internal: the images opened so far along the chain (loop and depth detection).
  std::vector<std::string>* chain = nullptr;
};

class VhdDevice final : public Layer {
 public:
  // Use Open; the constructor takes a loaded, validated image.
  VhdDevice(DevicePtr lower, VhdImage image, const VhdOptions& options, DevicePtr parent);
  ~VhdDevice() override;

  // Opens the VHD on `lower`: loads and validates its metadata (leniently when
  // options.for_check, see OpenOptions::for_check).
  static Result<DevicePtr> Open(DevicePtr lower, const VhdOptions& options = {});

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override;
  // Like MapExtents, but only what this image holds: for a differencing disk, sectors it does
  // not hold are holes (zero), whatever the parent has.
  Status MapOwnExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out);
  // Fixed: the file at the same offset (creating it wrote only the footer, past the data).
  // Differencing: the parent at the same offset, zeros past its end (or all zeros, opened
  // alone). Dynamic: zeros.
  UnwrittenOrigin OriginOfUnwritten(uint64_t offset) const override;
  Status Check(CheckMode mode, CheckResult* out) override;

  bool is_dynamic() const { return image_.is_dynamic(); }
  // Differencing disks: the parent (read-only; itself a VhdDevice), else nullptr.
  BlockDevice* parent() const { return parent_.get(); }
  const VhdImage& image() const { return image_; }
  // Which size rule produced the virtual size, in words.
  const std::string& size_source() const { return size_source_; }

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;
  Status CloseLayer() override;

 private:
  VhdImage image_;
  VhdOptions options_;
  std::string size_source_;
  DevicePtr parent_;
  std::unique_ptr<DynamicState> dynamic_;
};

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_DEVICE_H_
