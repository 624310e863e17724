#include "lib/shared_sync_io.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/sync_io.h"

namespace vstack {
namespace internal {

// What a SharedSyncIo shares with the thread slots of every thread that has called it. Threads
// keep it alive through their slots, so a thread that exits after the object is gone still
// finds it.
struct SharedSyncState {
  std::atomic<bool> closing{false};
  std::atomic<uint64_t> running{0};  // calls between their start and their return
  std::mutex mu;
  std::condition_variable idle;    // running dropped to 0 while closing
  std::vector<ThreadSlot*> slots;  // guarded by mu: every live slot of this object
};

// One thread's state for one SharedSyncIo: its queue and its bounce buffer. Only the owner
// thread touches it, except that Close() destroys the queue (under `shared->mu`) once no call
// runs.
struct ThreadSlot {
  uint64_t owner_id = 0;
  std::shared_ptr<SharedSyncState> shared;
  std::unique_ptr<IoQueue> queue;
  AlignedBuffer bounce;
};

}  // namespace internal

namespace {

using internal::SharedSyncState;
using internal::ThreadSlot;

std::atomic<uint64_t> g_next_id{1};

// Destroys the slot's queue and unlinks the slot from its owner. Owner thread only.
void Retire(ThreadSlot& slot) {
  std::lock_guard lock(slot.shared->mu);
  if (slot.queue) {
    slot.queue->WaitIdle();
    slot.queue.reset();
  }
  std::erase(slot.shared->slots, &slot);
}

// The calling thread's slots, one per SharedSyncIo it has called; retired when the thread exits.
struct ThreadSlots {
  std::vector<std::unique_ptr<ThreadSlot>> slots;
  ~ThreadSlots() {
    for (auto& s : slots) Retire(*s);
  }
};
thread_local ThreadSlots t_slots;

// Counts one call as running for its lifetime, unless Close() has started (refused()). Both
// sides use sequentially consistent operations: either the call sees `closing`, or Close() sees
// the call running and waits for it.
class RunningCall {
 public:
  explicit RunningCall(SharedSyncState& s) : s_(s) {
    s_.running.fetch_add(1);
    refused_ = s_.closing.load();
  }
  ~RunningCall() {
    if (s_.running.fetch_sub(1) == 1 && s_.closing.load()) {
      std::lock_guard lock(s_.mu);
      s_.idle.notify_all();
    }
  }
  bool refused() const { return refused_; }

 private:
  SharedSyncState& s_;
  bool refused_ = false;
};

}  // namespace

SharedSyncIo::SharedSyncIo(std::string spec, DevicePtr device)
    : spec_(std::move(spec)),
      device_(std::move(device)),
      id_(g_next_id.fetch_add(1)),
      shared_(std::make_shared<SharedSyncState>()) {}

SharedSyncIo::~SharedSyncIo() { (void)Close(); }

Result<ThreadSlot*> SharedSyncIo::Slot() {
  for (auto& s : t_slots.slots) {
    if (s->owner_id != id_) continue;
    if (!s->queue) return MakeError(Errc::kCancelled, spec_ + ": closed");
    return s.get();
  }
  // First call from this thread: forget slots of objects closed since, then open a queue.
  std::erase_if(t_slots.slots, [](const std::unique_ptr<ThreadSlot>& s) {
    if (!s->shared->closing.load()) return false;
    Retire(*s);  // its Close() may still be waiting for other calls: unlink it first
    return true;
  });
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, device_->OpenQueue());
  auto slot = std::make_unique<ThreadSlot>();
  slot->owner_id = id_;
  slot->shared = shared_;
  slot->queue = std::move(queue);
  {
    std::lock_guard lock(shared_->mu);
    shared_->slots.push_back(slot.get());
  }
  t_slots.slots.push_back(std::move(slot));
  return t_slots.slots.back().get();
}

void SharedSyncIo::ReleaseThreadQueue() {
  auto it = std::find_if(
      t_slots.slots.begin(), t_slots.slots.end(),
      [this](const std::unique_ptr<ThreadSlot>& s) { return s->owner_id == id_; });
  if (it == t_slots.slots.end()) return;
  Retire(**it);
  t_slots.slots.erase(it);
}

std::error_code SharedSyncIo::Run(Op op, std::byte* buf, uint64_t length, uint64_t offset,
                                  IoFlags flags) {
  RunningCall call(*shared_);
  if (call.refused()) return make_error_code(Errc::kCancelled);
  auto slot = Slot();
  if (!slot) return slot.error().code;
  ThreadSlot& s = **slot;
  IoRequest req;
  req.op = op;
  req.flags = flags;
  req.offset = offset;
  req.length = length;
  iovec iov{buf, length};
  const uint32_t align = device_->geometry().mem_alignment;
  const bool data = op == Op::kRead || op == Op::kWrite;
  const bool bounce = data && align > 1 && reinterpret_cast<uintptr_t>(buf) % align != 0;
  if (bounce) {
    if (s.bounce.size() < length) {
      s.bounce = AlignedBuffer(length, std::max<uint32_t>(align, 4096));
    }
    if (op == Op::kWrite) std::memcpy(s.bounce.data(), buf, length);
    iov.iov_base = s.bounce.data();
  }
  if (data) {
    req.iov = &iov;
    req.iovcnt = 1;
  }
  const std::error_code ec = Execute(*s.queue, req);
  if (bounce && op == Op::kRead && !ec) std::memcpy(buf, s.bounce.data(), length);
  return ec;
}

std::error_code SharedSyncIo::Read(uint64_t offset, std::span<std::byte> buf) {
  if (buf.empty()) return {};
  return Run(Op::kRead, buf.data(), buf.size(), offset, 0);
}

std::error_code SharedSyncIo::Write(uint64_t offset, std::span<const std::byte> buf,
                                    IoFlags flags) {
  if (buf.empty()) return {};
  return Run(Op::kWrite, const_cast<std::byte*>(buf.data()), buf.size(), offset, flags);
}

std::error_code SharedSyncIo::Flush() { return Run(Op::kFlush, nullptr, 0, 0, 0); }

std::error_code SharedSyncIo::Discard(uint64_t offset, uint64_t length, IoFlags flags) {
  if (length == 0) return {};
  return Run(Op::kDiscard, nullptr, length, offset, flags);
}

std::error_code SharedSyncIo::WriteZeroes(uint64_t offset, uint64_t length, IoFlags flags) {
  if (length == 0) return {};
  return Run(Op::kWriteZeroes, nullptr, length, offset, flags);
}

std::error_code SharedSyncIo::Query(const std::function<void(BlockDevice&)>& query) {
  RunningCall call(*shared_);
  if (call.refused()) return make_error_code(Errc::kCancelled);
  query(*device_);
  return {};
}

bool SharedSyncIo::closing() const { return shared_->closing.load(); }

Status SharedSyncIo::Close() {
  std::lock_guard close_lock(close_mu_);
  if (closed_) return close_status_;
  closed_ = true;
  {
    std::unique_lock lock(shared_->mu);
    shared_->closing.store(true);
    shared_->idle.wait(lock, [this] { return shared_->running.load() == 0; });
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

}  // namespace vstack
