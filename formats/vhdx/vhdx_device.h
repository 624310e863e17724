// vhdx: Microsoft VHDX images (fixed and dynamic, 512-byte or 4 KiB logical sectors) as a
// layer over any device holding the image file: `vhdx+file:/var/tmp/d.vhdx`, or a plain path
// opened by OpenImage (probed by the "vhdxfile" identifier). docs/layers/vhdx.md describes
// the format, the write order through the log and its crash guarantees, the counters and the
// limits.
//
// Reads and writes of present blocks go down asynchronously, one lower request per block
// piece. The first write to a block that is not present allocates it: under one mutex, the
// data is written into new space at the end of the file (zeros around it where the space may
// hold old bytes), the changed BAT page is written to the log with FUA, and only then in
// place. A dirty log is replayed when the image is opened writable (vhdx_image.h).
#ifndef VSTACK_FORMATS_VHDX_VHDX_DEVICE_H_
#define VSTACK_FORMATS_VHDX_VHDX_DEVICE_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "formats/vhdx/vhdx_image.h"
#include "formats/vhdx/vhdx_log_writer.h"
#include "lib/layer.h"

namespace vstack::vhdx {

// The layer's own counters (DeclareCounters order).
enum VhdxCounter : size_t {
  kCounterAllocations,   // blocks allocated
  kCounterLogEntries,    // log entries written
  kCounterLogBytes,      // bytes written to the log
  kCounterLogFlushes,    // flushes before the log wrapped over entries not yet durable
  kCounterBatWrites,     // 4 KiB BAT pages written in place
  kCounterHeaderWrites,  // header writes (two per update)
  kCounterZeroFills,     // blocks whose unwritten part was zeroed (reused or fixed-size space)
  kCounterZeroReads,     // read pieces answered with zeros, without I/O
  kCounterCount
};

struct VhdxOptions {
  bool for_check = false;
};

class VhdxDevice final : public Layer {
 public:
  // Use Open; the constructor takes a loaded, validated image.
  VhdxDevice(DevicePtr lower, VhdxImage image);
  ~VhdxDevice() override;

  // Opens the VHDX on `lower`, replaying its log if it has one and `lower` is writable.
  static Result<DevicePtr> Open(DevicePtr lower, const VhdxOptions& options = {});

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override;
  Status Check(CheckMode mode, CheckResult* out) override;

  const VhdxImage& image() const { return image_; }
  bool is_fixed() const { return image_.metadata.leave_blocks_allocated; }

  // For the queues (vhdx_device.cc). The BAT entry of payload block `block`.
  uint64_t Entry(uint64_t block) const {
    return bat_[image_.layout.Index(block)].load(std::memory_order_acquire);
  }
  // Before the first write after open: new file/data write GUIDs and a log GUID in both
  // headers. Cheap once done.
  Status BeginWrites(IoQueue& lower);
  // Writes `length` bytes of `iov` at `in_block` into payload block `block`, allocating it
  // first if it is not present (the write order of docs/layers/vhdx.md). Blocking.
  Status WriteAllocating(IoQueue& lower, uint64_t block, uint64_t in_block, const iovec* iov,
                         uint32_t iovcnt, uint64_t length);
  // Flushes the device below; log entries written before become reusable.
  Status Flush(IoQueue& lower);

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;
  Status CloseLayer() override;

 private:
  // Logs the BAT page holding entry `index` with `value` in it (FUA), submitting the
  // requests `with` (the block's data) at the same time; once all have completed, writes the
  // page in place and publishes the entry. REQUIRES: mu_ held.
  Status CommitEntry(IoQueue& q, uint64_t index, uint64_t value, std::vector<IoRequest*> with);

  VhdxImage image_;
  std::unique_ptr<std::atomic<uint64_t>[]> bat_;
  const bool growable_;
  std::atomic<bool> writing_{false};  // BeginWrites done

  std::mutex mu_;                 // allocation, the log and the headers
  uint64_t file_end_;             // where the next new block goes (1 MiB aligned)
  std::optional<LogWriter> log_;  // from BeginWrites
  uint64_t opened_file_size_;     // a durable lower bound of the file size (FlushedFileOffset)
};

}  // namespace vstack::vhdx

#endif  // VSTACK_FORMATS_VHDX_VHDX_DEVICE_H_
