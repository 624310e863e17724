// BlockDevice: what every device shares (its queues, its stats and counters, range checks,
// resize and close). The per-thread queue's submission and completion path is in io_queue.cc.
#include "lib/block_device.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>

namespace vstack {

void DeviceDeleter::operator()(BlockDevice* device) const {
  if (device == nullptr) return;
  (void)device->Close();
  delete device;
}

BlockDevice::BlockDevice(std::string kind, Geometry geometry, Capabilities caps)
    : kind_(std::move(kind)), geometry_(geometry), caps_(caps) {
  retired_ = EmptyStats();
}

BlockDevice::~BlockDevice() { assert(queues_.empty() && "destroy every queue before its device"); }

Result<std::unique_ptr<IoQueue>> BlockDevice::OpenQueue() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return MakeError(Errc::kCancelled, kind_ + ": device is closed");
    if (!(caps_ & kCapThreadSafe) && !queues_.empty()) {
      return MakeError(Errc::kBusy, kind_ + ": device supports only one queue at a time");
    }
  }
  return DoOpenQueue();
}

LayerStats BlockDevice::EmptyStats() const {
  LayerStats s;
  s.counter_names = counter_names_;
  s.counters.assign(counter_names_.size(), 0);
  return s;
}

std::vector<uint64_t> BlockDevice::InFlightByQueue() const {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> out;
  for (const IoQueue* q : queues_) out.push_back(q->in_flight());
  return out;
}

LayerStats BlockDevice::Stats() const { return Collect(true); }

LayerStats BlockDevice::Counts() const { return Collect(false); }

LayerStats BlockDevice::Collect(bool histograms) const {
  std::lock_guard lock(mu_);
  LayerStats out;
  if (histograms) {
    out = retired_;
  } else {
    out.op = retired_.op;
    out.in_flight = retired_.in_flight;
    out.counter_names = retired_.counter_names;
    out.counters = retired_.counters;
  }
  for (const IoQueue* q : queues_) q->stats_.AddTo(out, histograms);
  for (size_t i = 0; i < counter_names_.size(); ++i) {
    out.counters[i] += shared_counters_[i].load(std::memory_order_relaxed);
  }
  out.cpu_ns = cpu_.ns.load(std::memory_order_relaxed);
  out.cpu_samples = cpu_.samples.load(std::memory_order_relaxed);
  for (size_t p = 0; p < kCpuPhaseCount; ++p) {
    out.cpu_phase_ns[p] = cpu_phases_[p].ns.load(std::memory_order_relaxed);
    out.cpu_ns += out.cpu_phase_ns[p];
    out.cpu_samples += cpu_phases_[p].samples.load(std::memory_order_relaxed);
  }
  return out;
}

Status BlockDevice::CheckRange(uint64_t offset, uint64_t length) const {
  const uint64_t size = size_bytes();
  if (offset > size || length > size - offset) {
    return MakeError(Errc::kOutOfRange, kind_ + ": range " + std::to_string(offset) + "+" +
                                            std::to_string(length) + " is beyond the end (" +
                                            std::to_string(size) + ")");
  }
  return OkStatus();
}

Status BlockDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  AppendExtent(out, offset, length, 0);
  return OkStatus();
}

Status BlockDevice::Resize(uint64_t size) {
  if (!Has(kCapResizable)) {
    return MakeError(Errc::kNotSupported, kind_ + ": this device cannot be resized");
  }
  if (read_only()) return MakeError(Errc::kReadOnly, kind_ + ": read-only, cannot be resized");
  if (size == 0 || size % geometry_.logical_block != 0) {
    return MakeError(Errc::kUnaligned, kind_ + ": new size " + std::to_string(size) +
                                           " is not a positive multiple of " +
                                           std::to_string(geometry_.logical_block));
  }
  std::lock_guard lock(resize_mu_);
  VSTACK_RETURN_IF_ERROR(DoResize(size));
  __atomic_store_n(&geometry_.size_bytes, size, __ATOMIC_RELEASE);
  return OkStatus();
}

Status BlockDevice::DoResize(uint64_t size) {
  return MakeError(Errc::kNotSupported, kind_ + ": this device cannot be resized");
}

Status BlockDevice::Close() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return close_status_;
    if (!queues_.empty()) {
      return MakeError(Errc::kBusy, kind_ + ": cannot close while " +
                                        std::to_string(queues_.size()) + " queue(s) are open");
    }
    closed_ = true;
  }
  Status s = DoClose();
  std::lock_guard lock(mu_);
  close_status_ = s;
  return s;
}

void BlockDevice::DeclareCounters(std::vector<std::string> names) {
  assert(queues_.empty());
  counter_names_ = std::move(names);
  shared_counters_ = std::make_unique<std::atomic<uint64_t>[]>(counter_names_.size());
  retired_ = EmptyStats();
}

void BlockDevice::AddQueue(IoQueue* q) {
  std::lock_guard lock(mu_);
  queues_.push_back(q);
  open_queue_count_.store(queues_.size(), std::memory_order_relaxed);
}

void BlockDevice::RemoveQueue(IoQueue* q) {
  std::lock_guard lock(mu_);
  q->stats_.AddTo(retired_);
  queues_.erase(std::find(queues_.begin(), queues_.end(), q));
  open_queue_count_.store(queues_.size(), std::memory_order_relaxed);
}

}  // namespace vstack
