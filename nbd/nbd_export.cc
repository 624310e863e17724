#include "nbd/nbd_export.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"

namespace vstack::nbd {
namespace internal {

// What an export shares with the thread slots of every thread that has called it. Threads
// keep it alive through their slots, so a thread that exits after the export is gone still
// finds it.
struct SharedState {
  std::mutex mu;
  bool closed = false;             // guarded by mu
  std::vector<ThreadSlot*> slots;  // guarded by mu: every live slot of this export
};

// One thread's state for one export: its queue and its bounce buffer. Only the owner thread
// touches it, except that Close() destroys the queue (under `shared->mu`) once no call runs.
struct ThreadSlot {
  uint64_t export_id = 0;
  std::shared_ptr<SharedState> shared;
  std::unique_ptr<IoQueue> queue;
  AlignedBuffer bounce;
};

}  // namespace internal

namespace {

using internal::SharedState;
using internal::ThreadSlot;

std::atomic<uint64_t> g_next_export_id{1};

// Destroys the slot's queue and unlinks the slot from its export. Owner thread only.
void Retire(ThreadSlot& slot) {
  std::lock_guard lock(slot.shared->mu);
  if (slot.queue) {
    slot.queue->WaitIdle();
    slot.queue.reset();
  }
  std::erase(slot.shared->slots, &slot);
}

// The calling thread's slots, one per export it has called; retired when the thread exits.
struct ThreadSlots {
  std::vector<std::unique_ptr<ThreadSlot>> slots;
  ~ThreadSlots() {
    for (auto& s : slots) Retire(*s);
  }
};
thread_local ThreadSlots t_slots;

bool IsClosed(const ThreadSlot& slot) {
  std::lock_guard lock(slot.shared->mu);
  return slot.shared->closed;
}

uint32_t FloorPowerOfTwo(uint64_t v) {
  uint32_t p = 1;
  while (p <= v / 2 && p < (1u << 31)) p <<= 1;
  return p;
}

}  // namespace

int ErrnoFor(std::error_code ec) {
  if (!ec) return 0;
  if (ec.category() == std::system_category() || ec.category() == std::generic_category()) {
    return ec.value() > 0 ? ec.value() : EIO;
  }
  if (ec == make_error_code(Errc::kCancelled)) return ESHUTDOWN;
  const std::error_condition c = ec.default_error_condition();
  if (c.category() == std::generic_category() && c.value() > 0) return c.value();
  return EIO;
}

Result<std::unique_ptr<NbdExport>> NbdExport::Open(const std::string& spec_or_path,
                                                   bool read_only) {
  OpenOptions options;
  options.read_only = read_only;
  std::string spec;
  VSTACK_ASSIGN_OR_RETURN(DevicePtr device, OpenImage(spec_or_path, options, &spec));
  return std::make_unique<NbdExport>(std::move(spec), std::move(device));
}

NbdExport::NbdExport(std::string spec, DevicePtr device)
    : spec_(std::move(spec)),
      device_(std::move(device)),
      id_(g_next_export_id.fetch_add(1)),
      shared_(std::make_shared<SharedState>()) {}

NbdExport::~NbdExport() { (void)Close(); }

BlockSizes NbdExport::block_sizes() const {
  const Geometry& g = device_->geometry();
  BlockSizes b;
  b.minimum = g.logical_block;
  // NBD wants a power of two between 512 bytes and 32 MiB, at least the minimum.
  const uint64_t physical = std::max<uint64_t>(g.physical_block, g.logical_block);
  b.preferred = std::clamp<uint32_t>(FloorPowerOfTwo(physical), std::max(512u, b.minimum),
                                     kMaxRequestBytes);
  b.maximum = kMaxRequestBytes / b.minimum * b.minimum;
  return b;
}

ExportFlags NbdExport::flags() const {
  const BlockDevice& d = *device_;
  ExportFlags f;
  f.writable = d.Has(kCapWrite);
  f.flush = d.Has(kCapFlush);
  // Without native FUA the queue emulates it with a flush after the request.
  f.fua = f.writable && (d.Has(kCapFua) || d.Has(kCapFlush));
  f.trim = f.writable && d.Has(kCapDiscard);
  // Without native write-zeroes the queue writes zeros; FAST_ZERO then fails at once with
  // kNotSupported, which is exactly what a client asking for a fast zero wants to know.
  f.zero = f.writable;
  f.fast_zero = f.writable;
  f.extents = d.Has(kCapExtents);
  // All connections share one device; a flush on any queue makes every completed write
  // durable, and reads see every completed write (docs/design.md), which is what multi-conn
  // promises. A stack that allows one queue at a time can only serve one connection.
  f.multi_conn = parallel();
  return f;
}

Result<ThreadSlot*> NbdExport::Slot() {
  for (auto& s : t_slots.slots) {
    if (s->export_id != id_) continue;
    if (!s->queue) return MakeError(Errc::kCancelled, spec_ + ": the export is closed");
    return s.get();
  }
  // First call from this thread: forget slots of exports closed since, then open a queue.
  std::erase_if(t_slots.slots, [](const std::unique_ptr<ThreadSlot>& s) { return IsClosed(*s); });
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, device_->OpenQueue());
  auto slot = std::make_unique<ThreadSlot>();
  slot->export_id = id_;
  slot->shared = shared_;
  slot->queue = std::move(queue);
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->closed) return MakeError(Errc::kCancelled, spec_ + ": the export is closed");
    shared_->slots.push_back(slot.get());
  }
  t_slots.slots.push_back(std::move(slot));
  return t_slots.slots.back().get();
}

void NbdExport::ReleaseThreadQueue() {
  auto it = std::find_if(t_slots.slots.begin(), t_slots.slots.end(),
                         [this](const std::unique_ptr<ThreadSlot>& s) { return s->export_id == id_; });
  if (it == t_slots.slots.end()) return;
  Retire(**it);
  t_slots.slots.erase(it);
}

std::error_code NbdExport::RunData(Op op, void* buf, uint32_t count, uint64_t offset,
                                   IoFlags flags) {
  auto slot = Slot();
  if (!slot) return slot.error().code;
  ThreadSlot& s = **slot;
  IoRequest req;
  req.op = op;
  req.flags = flags;
  req.offset = offset;
  req.length = count;
  iovec iov{buf, count};
  const uint32_t align = device_->geometry().mem_alignment;
  const bool bounce = (op == Op::kRead || op == Op::kWrite) && align > 1 &&
                      reinterpret_cast<uintptr_t>(buf) % align != 0;
  if (bounce) {
    if (s.bounce.size() < count) s.bounce = AlignedBuffer(count, std::max<uint32_t>(align, 4096));
    if (op == Op::kWrite) std::memcpy(s.bounce.data(), buf, count);
    iov.iov_base = s.bounce.data();
  }
  if (op == Op::kRead || op == Op::kWrite) {
    req.iov = &iov;
    req.iovcnt = 1;
  }
  const std::error_code ec = Execute(*s.queue, req);
  if (bounce && op == Op::kRead && !ec) std::memcpy(buf, s.bounce.data(), count);
  return ec;
}

std::error_code NbdExport::Read(void* buf, uint32_t count, uint64_t offset) {
  if (count == 0) return {};
  return RunData(Op::kRead, buf, count, offset, 0);
}

std::error_code NbdExport::Write(const void* buf, uint32_t count, uint64_t offset,
                                 IoFlags flags) {
  if (count == 0) return {};
  return RunData(Op::kWrite, const_cast<void*>(buf), count, offset, flags);
}

std::error_code NbdExport::Flush() { return RunData(Op::kFlush, nullptr, 0, 0, 0); }

std::error_code NbdExport::Trim(uint32_t count, uint64_t offset, IoFlags flags) {
  if (count == 0) return {};
  return RunData(Op::kDiscard, nullptr, count, offset, flags);
}

std::error_code NbdExport::Zero(uint32_t count, uint64_t offset, IoFlags flags) {
  if (count == 0) return {};
  return RunData(Op::kWriteZeroes, nullptr, count, offset, flags);
}

Status NbdExport::Extents(uint32_t count, uint64_t offset, std::vector<Extent>* out) {
  if (offset >= size()) {
    return MakeError(Errc::kOutOfRange, "block status at offset " + std::to_string(offset) +
                                            " is beyond the end (" + std::to_string(size()) + ")");
  }
  const uint64_t length = std::min<uint64_t>({count, kExtentWindow, size() - offset});
  if (length == 0) return MakeError(Errc::kInvalidArgument, "block status of zero length");
  return device_->MapExtents(offset, length, out);
}

Status NbdExport::Close() {
  if (closed_) return close_status_;
  closed_ = true;
  {
    std::lock_guard lock(shared_->mu);
    shared_->closed = true;
    for (ThreadSlot* s : shared_->slots) {
      if (s->queue) {
        s->queue->WaitIdle();
        s->queue.reset();
      }
    }
    shared_->slots.clear();
  }
  Status status;
  if (device_->Has(kCapWrite) && device_->Has(kCapFlush)) {
    SyncIo io(*device_);
    if (const std::error_code ec = io.Flush()) {
      status = MakeError(ec, spec_ + ": flush before close failed: " + ec.message());
    }
  }
  Status closed = device_->Close();
  if (!closed && status) status = Annotate(std::move(closed).error(), spec_ + ": close");
  close_status_ = status;
  return status;
}

}  // namespace vstack::nbd
