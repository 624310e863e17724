#include "blockdev/sim/sim_device.h"

#include "lib/progress.h"
#include "lib/registry.h"
#include "lib/size.h"

namespace vstack::sim {
namespace {

thread_local SimHost* current_host = nullptr;

Capabilities CapsOf(const SimDiskTraits& t, bool read_only) {
  Capabilities caps = kCapRead | kCapFlush | kCapPersistent | kCapThreadSafe;
  if (!read_only) {
    caps |= kCapWrite;
    if (t.fua) caps |= kCapFua;
    if (t.write_zeroes) caps |= kCapWriteZeroes;
    if (t.resizable) caps |= kCapResizable | kCapDiscard | kCapDiscardZeroes;
  }
  return caps;
}

Geometry GeometryOf(const SimDisk& disk, const SimDiskTraits& t) {
  Geometry g;
  g.size_bytes = disk.size();
  g.logical_block = 512;
  g.physical_block = 4096;
  g.mem_alignment = t.mem_alignment;
  g.max_transfer = t.max_transfer;
  return g;
}

ComponentInfo SimComponent() {
  auto open_sim = [](const OptionValues& o, const OpenOptions& open) -> Result<DevicePtr> {
    SimHost* host = CurrentSimHost();
    if (host == nullptr) {
      return MakeError(Errc::kNotFound,
                       "sim: no simulation runs on this thread; sim:" + o.positional() +
                           " is a disk of `vstack sim`, which builds its stacks on it");
    }
    const SimDiskEntry* entry = host->FindDisk(o.positional());
    if (entry == nullptr) {
      return MakeError(Errc::kNotFound, "sim: no simulated disk named '" + o.positional() +
                                            "'; the simulation has: " + host->DiskNames());
    }
    return MakeDevice<SimDevice>(o.positional(), *entry, *host, open.read_only);
  };
  return BackendComponent("sim",
                          "a simulated disk of `vstack sim` (exists only inside a simulation)",
                          "NAME", {}, open_sim);
}

VSTACK_REGISTER_COMPONENT(sim, SimComponent());

}  // namespace

SimHost* CurrentSimHost() { return current_host; }

SimHost* SetSimHost(SimHost* host) {
  SimHost* previous = current_host;
  current_host = host;
  return previous;
}

SimDevice::SimDevice(std::string name, SimDiskEntry entry, SimHost& host, bool read_only)
    : BlockDevice("sim", GeometryOf(*entry.disk, entry.traits), CapsOf(entry.traits, read_only)),
      name_(std::move(name)),
      disk_(std::move(entry.disk)),
      host_(host) {}

std::string SimDevice::Describe() const {
  return "sim " + name_ + " (simulated disk, " + FormatSize(disk_->size()) + ")";
}

Result<std::unique_ptr<IoQueue>> SimDevice::DoOpenQueue() {
  return std::unique_ptr<IoQueue>(new SimQueue(*this, host_));
}

Status SimDevice::DoResize(uint64_t size) {
  disk_->Resize(size);
  return OkStatus();
}

SimQueue::SimQueue(SimDevice& device, SimHost& host) : IoQueue(device), dev_(device), host_(host) {
  host_.QueueOpened(*this);
}

SimQueue::~SimQueue() { host_.QueueClosed(*this); }

void SimQueue::DoSubmit(std::span<IoRequest* const> batch) {
  for (IoRequest* req : batch) {
    SimRequest* r;
    if (free_.empty()) {
      pool_.push_back(std::make_unique<SimRequest>());
      r = pool_.back().get();
    } else {
      r = free_.back();
      free_.pop_back();
    }
    *r = SimRequest{};
    r->req = req;
    r->queue = this;
    if (req->op == Op::kFlush) r->barrier = dev_.disk().completed();
    if (host_.Submitted(*r)) {
      Execute(*r);
      Complete(*req, r->error);
      free_.push_back(r);
    }
  }
}

void SimQueue::Deliver(SimRequest& r) {
  Execute(r);
  ready_.push_back(&r);
}

void SimQueue::DoPoll(bool wait) {
  if (ready_.empty()) {
    if (wait) {
      WaitForProgress("sim: a request in flight on the simulated disk");
    } else {
      host_.Polled(*this, 0);
    }
    return;
  }
  std::vector<SimRequest*> done;
  done.swap(ready_);
  for (SimRequest* r : done) {
    Complete(*r->req, r->error);
    free_.push_back(r);
  }
  host_.Polled(*this, done.size());
}

void SimQueue::Execute(SimRequest& r) {
  SimDisk& disk = dev_.disk();
  IoRequest& q = *r.req;
  const bool fua = (q.flags & kIoFua) != 0;
  std::error_code ec;
  switch (q.op) {
    case Op::kRead:
      if (!r.error) disk.Read(q.offset, q.length, q.iov, q.iovcnt);
      return;
    case Op::kWrite:
      ec = disk.Write(q.offset, q.length, q.iov, q.iovcnt, fua, r.error ? r.land : q.length);
      break;
    case Op::kWriteZeroes:
      if (!r.error) ec = disk.Zero(q.offset, q.length, (q.flags & kIoMayUnmap) != 0, fua);
      break;
    case Op::kDiscard:
      if (!r.error) ec = disk.Zero(q.offset, q.length, /*deallocate=*/true, fua);
      break;
    case Op::kFlush:
      if (!r.error) disk.Flush(r.barrier);
      return;
  }
  if (ec && !r.error) r.error = ec;
}

}  // namespace vstack::sim
