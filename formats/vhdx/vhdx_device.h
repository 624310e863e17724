// vhdx: Microsoft VHDX images (fixed and dynamic, 512-byte or 4 KiB logical sectors) as a
// layer over any device holding the image file: `vhdx+file:/var/tmp/d.vhdx`, or a plain path
// opened by OpenImage (probed by the "vhdxfile" identifier). docs/layers/vhdx.md describes
// the format, the write order through the log and its crash guarantees, the counters and the
// limits.
//
// Reads and writes of present blocks go down asynchronously, one lower request per block
// piece. The first write to a block that is not present allocates it, and allocations are
// group-committed: those of one submitted batch, and those that other queues queue meanwhile,
// are committed together by one thread. Their data goes into new space at the end of the file
// (zeros around it where the space may hold old bytes), every changed BAT page is written to
// the log in one entry with FUA, and only then in place. A dirty log is replayed when the
// image is opened writable (vhdx_image.h).
#ifndef VSTACK_FORMATS_VHDX_VHDX_DEVICE_H_
#define VSTACK_FORMATS_VHDX_VHDX_DEVICE_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "formats/vhdx/vhdx_image.h"
#include "formats/vhdx/vhdx_log_writer.h"
#include "lib/layer.h"
#include "lib/progress.h"

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

// A write into a payload block that was not present when the write was translated.
struct Allocation {
  uint64_t block = 0;
  uint64_t in_block = 0;
  uint64_t length = 0;
  std::vector<iovec> iov;
  void* owner = nullptr;   // the caller's
  std::error_code status;  // set by VhdxDevice::Allocate
  bool done = false;       // guarded by the device's group-commit mutex
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
  // Per payload block: a present block shows the file where the BAT puts it (a fixed VHDX's
  // blocks are all present from creation, which writes nothing there); any other block reads
  // as zeros (not present, zero, unmapped); a block the BAT marks unusable is unknown.
  UnwrittenOrigin OriginOfUnwritten(uint64_t offset) const override;
  Status Check(CheckMode mode, CheckResult* out) override;

  const VhdxImage& image() const { return image_; }
  bool is_fixed() const { return image_.metadata.leave_blocks_allocated; }

  // For the queues (vhdx_device.cc). The BAT entry of payload block `block`.
  uint64_t Entry(uint64_t block) const { return image_.bat.Get(image_.layout.Index(block)); }
  // Before the first write after open: new file/data write GUIDs and a log GUID in both
  // headers. Cheap once done.
  Status BeginWrites(IoQueue& lower);
  // Writes each allocation's data into its payload block, allocating the blocks that are not
  // present (the write order of docs/layers/vhdx.md), and sets each one's status. Concurrent
  // callers are group-committed: whichever finds no commit running commits every allocation
  // waiting, through its own `lower` queue, with one log entry for all of their BAT pages
  // (more only past 126 pages); the others wait for it. Blocking.
  void Allocate(IoQueue& lower, std::span<Allocation* const> allocs);
  // Flushes the device below; log entries written before become reusable.
  Status Flush(IoQueue& lower);

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;
  Status CloseLayer() override;

 private:
  // Places and writes the allocations of one group, logs every changed BAT page (FUA) with the
  // data of new space submitted at the same time, then writes the pages in place and publishes
  // the entries. An allocation that cannot get space fails alone. REQUIRES: mu_ held.
  Status CommitGroup(IoQueue& q, std::span<Allocation* const> group);

  // image_.bat is shared by the queues: they read it, CommitGroup sets new entries (atomic
  // entries, pages allocated by their first non-zero entry; bat_table.h).
  VhdxImage image_;
  const bool growable_;
  std::atomic<bool> writing_{false};  // BeginWrites done

  std::mutex group_mu_;  // pending_ and committing_
  std::condition_variable group_cv_;
  std::vector<Allocation*> pending_;  // allocations waiting for the next group
  bool committing_ = false;

  IoMutex mu_;                    // allocation, the log and the headers (held across I/O)
  uint64_t file_end_;             // where the next new block goes (1 MiB aligned)
  std::optional<LogWriter> log_;  // from BeginWrites
  uint64_t opened_file_size_;     // a durable lower bound of the file size (FlushedFileOffset)
};

}  // namespace vstack::vhdx

#endif  // VSTACK_FORMATS_VHDX_VHDX_DEVICE_H_
