// sim: the simulated backend, `sim:NAME`. It exists only inside a simulation (analysis/sim,
// `vstack sim`): the simulation that runs on the calling thread (its SimHost) owns the disks
// (sim_disk.h) by name and decides, for every request, when and how it completes.
//
// A request is executed against the disk when the host delivers it (Deliver): a write lands, and
// a read copies, at that instant; then it waits on its queue's ready list until the queue is
// polled, so a completion reaches its caller only through a Poll of that queue (a queue nobody
// polls holds its completed requests for good, as a real one would). The host may also ask
// for a request to complete inside Submit. A queue polled with nothing ready waits through the
// progress seam (lib/progress.h), which gives the simulation its turn.
//
// Capabilities follow the disk's SimDiskTraits: a file-like disk resizes (Resize) and
// discards (a hole punch: discarded bytes read as zeros); FUA and write-zeroes may be native
// or left to the generic layer's emulation; requests may be split at max_transfer.
#ifndef VSTACK_BLOCKDEV_SIM_SIM_DEVICE_H_
#define VSTACK_BLOCKDEV_SIM_SIM_DEVICE_H_

#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "blockdev/sim/sim_disk.h"
#include "lib/block_device.h"

namespace vstack::sim {

class SimQueue;

// How a simulated disk presents itself.
struct SimDiskTraits {
  bool resizable = true;  // a file: Resize, discard
  bool fua = false;       // native FUA (else write + flush, by the generic layer)
  bool write_zeroes = true;
  uint32_t mem_alignment = 512;
  uint64_t max_transfer = 0;  // 0: unlimited
};

// A named disk of a simulation.
struct SimDiskEntry {
  std::shared_ptr<SimDisk> disk;
  SimDiskTraits traits;
};

// One request on a simulated device, from Submit to its completion.
struct SimRequest {
  IoRequest* req = nullptr;
  SimQueue* queue = nullptr;
  uint64_t id = 0;       // unique in the simulation, in submission order (set by the host)
  uint64_t barrier = 0;  // a flush: SimDisk::completed() at submission
  uint64_t due = 0;      // the host's: when it delivers the request
  // Decided by the host at submission: an injected error (the disk may add ENOSPC), and for a
  // failing write, the bytes of it that land first (a torn write).
  std::error_code error;
  uint64_t land = 0;
};

// The simulation, as the simulated devices see it.
class SimHost {
 public:
  virtual ~SimHost() = default;
  // The disk named `name`, or nullptr.
  virtual const SimDiskEntry* FindDisk(const std::string& name) = 0;
  // The disks' names, for an error message.
  virtual std::string DiskNames() = 0;
  // `r` was submitted: set r.error and r.land, and return true to complete it now (inside
  // Submit), or false to call r.queue->Deliver(r) later (when the simulated time comes).
  virtual bool Submitted(SimRequest& r) = 0;
  // `q` was polled and reaped `reaped` completed requests, whose callbacks run now (something
  // another simulated thread may wait for). A thread that polls without ever waiting (a spin)
  // is the host's to suspend here.
  virtual void Polled(SimQueue& q, size_t reaped) = 0;
  // Bookkeeping for the liveness report.
  virtual void QueueOpened(SimQueue& q) = 0;
  virtual void QueueClosed(SimQueue& q) = 0;
};

// The host of the calling thread (nullptr outside a simulation), and installing one.
SimHost* CurrentSimHost();
SimHost* SetSimHost(SimHost* host);

class SimDevice final : public BlockDevice {
 public:
  SimDevice(std::string name, SimDiskEntry entry, SimHost& host, bool read_only);
  std::string Describe() const override;
  bool fresh() const override { return disk_->fresh(); }
  // Zeros: a simulated disk starts as zeros, and its space grows as zeros.
  UnwrittenOrigin OriginOfUnwritten(uint64_t offset) const override {
    return UnwrittenOrigin::Zeros(size_bytes() - offset);
  }
  const std::string& name() const { return name_; }
  SimDisk& disk() const { return *disk_; }

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;
  Status DoResize(uint64_t size) override;

 private:
  const std::string name_;
  const std::shared_ptr<SimDisk> disk_;
  SimHost& host_;
};

class SimQueue final : public IoQueue {
 public:
  SimQueue(SimDevice& device, SimHost& host);
  ~SimQueue() override;

  SimDevice& sim_device() const { return dev_; }
  // Executes `r` against the disk and puts it on the ready list: it completes at this queue's
  // next Poll.
  void Deliver(SimRequest& r);
  // Requests completed by the disk but not yet reaped by a Poll of this queue.
  const std::vector<SimRequest*>& ready() const { return ready_; }

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override;
  void DoPoll(bool wait) override;

 private:
  void Execute(SimRequest& r);

  SimDevice& dev_;
  SimHost& host_;
  std::vector<SimRequest*> ready_;
  std::vector<std::unique_ptr<SimRequest>> pool_;
  std::vector<SimRequest*> free_;
};

}  // namespace vstack::sim

#endif  // VSTACK_BLOCKDEV_SIM_SIM_DEVICE_H_
