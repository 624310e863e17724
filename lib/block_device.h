// The block-device contract. Every backend, layer and format is a BlockDevice; stacks are
// BlockDevices that own the one below them.
//
// Threading: a BlockDevice may be shared by several threads. Each thread drives it through its
// own IoQueue (OpenQueue), in the style of SPDK's per-thread channels and one io_uring ring per
// thread. A queue is used by one thread at a time: Submit and Poll are not concurrent on the same
// queue. geometry(), capabilities(), Stats(), Properties() and MapExtents() are safe from any
// thread. Devices without kCapThreadSafe allow only one open queue at a time.
//
// Progress: a request may wait for work that the device does through another of its queues
// (a dynamic VHD's group commit or shared bitmap write is issued, and completed, by the queue
// of a thread that has a request waiting for it). So a thread keeps polling every queue on
// which it has requests in flight, and never blocks (on a lock, or waiting for a request on
// another queue, as a synchronous metadata commit does) while it has requests in flight on a
// queue it is not polling: it lets that queue go idle first (WaitIdle).
//
// Asynchrony: Submit takes a batch of requests and never blocks on I/O; each request completes
// exactly once, either inside Submit (memory, null, file, CPU-bound layers) or inside a later
// Poll (io_uring). Callers never assume which. Blocking helpers live in lib/sync_io.h.
//
// Semantics (docs/design.md): Flush makes every write that completed before it was submitted
// durable. A write with kIoFua is durable when it completes. Write-zeroes reads back as zeros.
// Discard is a hint: the content of a discarded range is unspecified afterwards unless the device
// has kCapDiscardZeroes.
//
// Checks: IoQueue::Submit validates every request (op, flags, bounds, block alignment, buffer
// alignment, read-only) before the device sees it, and completes a bad request with a vstack::Errc
// code. Devices may therefore trust every request that reaches DoSubmit. Buffers are walked
// once: a layer that forwards a read or write unchanged (LayerQueue::SubmitForwarded) has the
// queue below re-check its op, flags, range and block alignment but not its buffers, when the
// buffer alignment below divides its own (ForwardedChecksSuffice in lib/layer.h).
#ifndef VSTACK_LIB_BLOCK_DEVICE_H_
#define VSTACK_LIB_BLOCK_DEVICE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lib/cpu_account.h"
#include "lib/errors.h"
#include "lib/export.h"
#include "lib/extent.h"
#include "lib/geometry.h"
#include "lib/io_request.h"
#include "lib/property.h"
#include "lib/space_usage.h"
#include "lib/stats.h"
#include "lib/unwritten_origin.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

class IoQueue;
class BlockDevice;

// What `vstack check` asks of a layer: only look, repair leaked space, or repair everything
// that can be repaired safely (qemu-img check's -r leaks / -r all).
enum class CheckMode { kReadOnly, kRepairLeaks, kRepairAll };

struct CheckResult {
  uint64_t corruptions = 0;  // problems that make data unreliable
  uint64_t leaks = 0;        // space allocated but unused: harmless
  uint64_t repaired = 0;     // problems fixed by this run
  std::vector<std::string> messages;  // one line each, naming the field and offset
  // Asked by a check that reads data (a grain layer's scrub, before each chunk): false stops
  // it, and Check fails with Errc::kCancelled; what it repaired so far stays repaired (each
  // repair is whole). May be empty (the Python module's Ctrl-C sets it).
  std::function<bool()> keep_going;

  bool Stopped() const { return keep_going && !keep_going(); }
  void Corruption(std::string m) { ++corruptions; messages.push_back("ERROR " + std::move(m)); }
  void Leak(std::string m) { ++leaks; messages.push_back("Leaked " + std::move(m)); }
};

// Devices are owned through DevicePtr, whose deleter calls Close() (ignoring its result) before
// deleting, so metadata is persisted even when the owner forgets to close. Call Close() yourself
// to see errors.
struct DeviceDeleter {
  void operator()(BlockDevice* device) const;
};
using DevicePtr = std::unique_ptr<BlockDevice, DeviceDeleter>;

template <typename T, typename... Args>
DevicePtr MakeDevice(Args&&... args) {
  return DevicePtr(new T(std::forward<Args>(args)...));
}

class BlockDevice {
 public:
  BlockDevice(const BlockDevice&) = delete;
  BlockDevice& operator=(const BlockDevice&) = delete;
  // REQUIRES: every queue of this device has been destroyed.
  virtual ~BlockDevice();

  const Geometry& geometry() const { return geometry_; }
  // geometry().size_bytes, safe to read while another thread calls Resize().
  uint64_t size_bytes() const { return __atomic_load_n(&geometry_.size_bytes, __ATOMIC_ACQUIRE); }
  Capabilities capabilities() const { return caps_; }
  bool Has(Capability c) const { return (caps_ & c) != 0; }
  bool read_only() const { return !Has(kCapWrite); }

  // The registered name of this device's kind: "memory", "file", "vhd", "dedup"...
  const std::string& kind() const { return kind_; }
  // One line saying what this device is, e.g. "file /var/tmp/d.img (regular file, O_DIRECT)".
  virtual std::string Describe() const { return kind_; }
  // The device this one is stacked on, or nullptr for a backend.
  virtual BlockDevice* lower() const { return nullptr; }
  // True if this open made the device's whole content new, so nothing on it can be lost: a
  // file that this open created (or found empty and sized), a memory device, a layer over such
  // a device, a layer that formatted the device below in this open. A layer that keeps
  // metadata formats a device without a superblock only if it is fresh or the spec asks for it
  // (format=on): formatting is explicit, like mkfs. The default: false.
  virtual bool fresh() const { return false; }
  // How to take back what this open changed outside the process, once the device is closed: a
  // file or an image it created is removed; a file that existed and that it made larger
  // (size=, now or at the first write) gets its old size back. When a layer above fails to
  // open, Open() runs it (that layer has closed the stack below by then), so that a failed
  // command leaves nothing behind: no blank file or image for a later open to refuse as "not
  // created by this command", no file grown, nor an empty one formatted by a layer below the
  // one that failed. It touches only what this open made (never a file put at the path since).
  // Empty (the default) when the open changed nothing.
  virtual std::function<void()> open_undo() const { return {}; }

  // Opens a new queue for the calling thread. Thread-safe. Fails after Close(), and when a
  // second queue is requested from a device without kCapThreadSafe.
  Result<std::unique_ptr<IoQueue>> OpenQueue();

  // A snapshot of this layer's statistics, summed over all its queues, open and closed.
  LayerStats Stats() const;
  // The same without the latency histograms and paths (counts, bytes, errors, counters): the
  // cheap query for Space() and similar, which merges no histogram.
  LayerStats Counts() const;

  // What the queues opened from now on measure (lib/stats.h); kCounts by default. Queues
  // already open keep their mode. A device whose mode the stack spec chose (`stats=`,
  // PinStatsMode) keeps it: SetStatsMode then does nothing, so a tool that asks for latency on
  // a whole stack (`vstack bench`) leaves such a layer as the spec says. Thread-safe.
  void SetStatsMode(StatsMode mode) {
    if (!stats_mode_pinned_.load(std::memory_order_relaxed)) {
      stats_mode_.store(mode, std::memory_order_relaxed);
    }
  }
  // Sets the mode for good (the spec's `stats=` option, lib/registry.cc).
  void PinStatsMode(StatsMode mode) {
    stats_mode_.store(mode, std::memory_order_relaxed);
    stats_mode_pinned_.store(true, std::memory_order_relaxed);
  }
  StatsMode stats_mode() const { return stats_mode_.load(std::memory_order_relaxed); }

  // The account this device's CPU is charged to (lib/cpu_account.h): IoQueue tags the thread
  // with it while the device's own code runs. A layer that starts a thread of its own (commits,
  // write-back, discards) enrols it with this account as its home, on the thread:
  // `EnrolledThread helper(device.cpu_account());`. Thread-safe.
  CpuAccount& cpu_account() const { return cpu_; }
  // The account of one phase of this device's CPU (lib/cpu_account.h CpuPhase): the layer tags
  // the thread with it around the phase's code (internal::PhaseScope in lib/cpu_tag.h, or
  // ScopedCpuTag). Stats() adds the phases into the layer's CPU and lists each. Thread-safe.
  CpuAccount& cpu_phase_account(CpuPhase phase) const {
    return cpu_phases_[static_cast<size_t>(phase)];
  }

  // Layer-specific facts for `vstack info` (VHD type, dedup space figures...). Appends to
  // `out`; the base adds nothing.
  virtual void Properties(PropertyList& out) const {}

  // This layer's space accounting (lib/space_usage.h), for layers that map, deduplicate,
  // compress or checksum grains; nullopt for the others (the default). Thread-safe.
  virtual std::optional<SpaceUsage> Space() const { return std::nullopt; }
  // The same accounting restricted to the grains of this device's bytes [offset, offset+length)
  // (grain-aligned), for a space-saving layer below another one: the figures of the upper
  // layer's data area alone (from its Space().data_offset), without its metadata. nullopt when
  // the layer cannot tell (the default). Thread-safe.
  virtual std::optional<SpaceUsage> SpaceOf(uint64_t offset, uint64_t length) const {
    return std::nullopt;
  }

  // Describes allocation over [offset, offset+length): appends extents covering exactly that
  // range, in order, to `out`. The default reports one data extent. Devices with kCapExtents
  // report holes (never allocated / discarded) and known-zero ranges. Thread-safe; may do I/O.
  virtual Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out);

  // Where this device's bytes at `offset` (below size_bytes()) come from while nothing has
  // written them through it since it was made (lib/unwritten_origin.h). The default: kUnknown.
  // A ForwardingLayer and a fixed VHD show the device below at the same offset, a present VHDX
  // block the device below where the block is, a differencing VHD its parent; a thin layer (a
  // dynamic VHD, a VHDX block not present, dedup, zstd) and crc32c (its format zeroes the
  // device below) show zeros. Thread-safe; no I/O.
  virtual UnwrittenOrigin OriginOfUnwritten(uint64_t offset) const { return {}; }

  // Verifies this layer's own metadata (not the layers below; `vstack check` walks the stack).
  // Adds what it finds to `out`. With a repair mode, fixes what can be fixed without losing
  // data and counts it in out->repaired. The default has nothing to check. Returns an error
  // only when the check itself could not run (an I/O error; a device below that is not the
  // layer's, such as a blank one a read-only open presented empty); corruption goes into `out`.
  // When Check returns, the layer holds no queue of the device below (it opens one again when
  // it needs it), so that `vstack check` can go on to check and repair the device below: a
  // repair that rebuilds a layer's in-memory state refuses to run while any queue of that
  // layer is open (open_queues()), as such a queue would still point at the old state.
  // REQUIRES: no queue of this device is in use by another thread.
  virtual Status Check(CheckMode mode, CheckResult* out) { return OkStatus(); }
  // How many queues of this device exist now. Thread-safe, and lock-free: a layer reads it on
  // its data path (a grain layer's commit threshold per queue), from every queue's thread.
  size_t open_queues() const { return open_queue_count_.load(std::memory_order_relaxed); }
  // The requests in flight on each queue of this device, in the order the queues were opened:
  // a diagnostic, for a simulator's liveness report (which layer holds what). REQUIRES: no
  // queue of this device is in use by another thread (the counts are read unsynchronised).
  std::vector<uint64_t> InFlightByQueue() const;

  // Changes the size of a device with kCapResizable (others: Errc::kNotSupported; read-only
  // devices: Errc::kReadOnly), for an image
  // format that grows or shrinks its file (VHD). `size` must be a multiple of logical_block.
  // Growing makes [old size, size) addressable and reading as zeros; a regular file's length on
  // disk then follows the data written there, as with pwrite past the end, so after a crash
  // the file is as long as the writes that reached the disk (the crash model of
  // tests/testing/recording_device.h). Shrinking truncates. Thread-safe against requests on
  // other queues; REQUIRES: no request in flight touches a range that shrinking removes.
  Status Resize(uint64_t size);

  // Persists metadata and releases resources; a layer then closes the device below it. After
  // Close, OpenQueue fails. Idempotent: later calls return the first result.
  // REQUIRES: every queue of this device has been destroyed.
  Status Close();

 protected:
  BlockDevice(std::string kind, Geometry geometry, Capabilities caps);

  // Creates a queue. Called under no lock; may be called from several threads at once.
  virtual Result<std::unique_ptr<IoQueue>> DoOpenQueue() = 0;
  // Does the work of Close(). The default does nothing.
  virtual Status DoClose() { return OkStatus(); }
  // Does the work of Resize() (called with the new size already checked, serialised with other
  // resizes; size_bytes() changes after it succeeds). The default refuses.
  virtual Status DoResize(uint64_t size);

  // kOutOfRange unless [offset, offset+length) lies within the device (overflow-safe). For
  // control-path queries such as MapExtents; the data path is checked by IoQueue.
  Status CheckRange(uint64_t offset, uint64_t length) const;

  // Declares this layer's own counters, by name. Call once, in the constructor, before any
  // queue exists. Ids are the positions in `names`.
  void DeclareCounters(std::vector<std::string> names);
  // Bumps a counter for events not tied to one queue (e.g. a metadata commit done on behalf of
  // several queues). Thread-safe (an atomic add).
  void CountShared(size_t id, uint64_t n = 1) {
    shared_counters_[id].fetch_add(n, std::memory_order_relaxed);
  }
  // Adjust geometry or capabilities while opening (before any queue exists).
  Geometry& mutable_geometry() { return geometry_; }
  void set_capabilities(Capabilities caps) { caps_ = caps; }

 private:
  friend class IoQueue;
  void AddQueue(IoQueue* q);
  void RemoveQueue(IoQueue* q);
  LayerStats EmptyStats() const;
  LayerStats Collect(bool histograms) const;

  std::string kind_;
  std::atomic<StatsMode> stats_mode_{StatsMode::kCounts};
  std::atomic<bool> stats_mode_pinned_{false};
  Geometry geometry_;
  Capabilities caps_;
  std::vector<std::string> counter_names_;
  std::unique_ptr<std::atomic<uint64_t>[]> shared_counters_;
  mutable CpuAccount cpu_;
  mutable std::array<CpuAccount, kCpuPhaseCount> cpu_phases_;

  mutable std::mutex mu_;
  std::mutex resize_mu_;           // serialises Resize()
  std::vector<IoQueue*> queues_;   // guarded by mu_
  std::atomic<size_t> open_queue_count_{0};  // queues_.size(), written under mu_
  LayerStats retired_;             // stats of destroyed queues; guarded by mu_
  bool closed_ = false;            // guarded by mu_
  Status close_status_;            // guarded by mu_
};

// A per-thread submission and completion queue of one device.
//
// Derived classes implement DoSubmit (and DoPoll if they complete later) and call Complete()
// exactly once per request they were given. The base class owns validation, statistics, the
// emulation of missing capabilities (FUA, write-zeroes) and splitting above max_transfer.
class IoQueue {
 public:
  IoQueue(const IoQueue&) = delete;
  IoQueue& operator=(const IoQueue&) = delete;
  // REQUIRES: in_flight() == 0 (call WaitIdle() first).
  virtual ~IoQueue();

  // Starts every request of `batch`. Never blocks on I/O. Requests may complete (and their
  // callbacks run) before Submit returns. The requests and their buffers must stay valid until
  // their callbacks have run.
  void Submit(std::span<IoRequest* const> batch);
  void Submit(IoRequest& req) {
    IoRequest* one = &req;
    Submit(std::span<IoRequest* const>(&one, 1));
  }

  // Reaps completions, running their callbacks. Returns once at least `min_completions`
  // requests of this queue have completed during the call, or nothing is in flight. With
  // min_completions = 0 it never blocks. Returns the number of callbacks run.
  size_t Poll(size_t min_completions = 0);

  // Polls until nothing is in flight. REQUIRES: not called from a callback of this queue's
  // completions (they would never run).
  void WaitIdle();

  // Requests submitted whose callbacks have not run yet.
  uint64_t in_flight() const { return in_flight_; }
  BlockDevice& device() const { return device_; }

  // A hint: these buffers will carry this queue's I/O for the queue's lifetime (e.g. a
  // benchmark's buffer pool). Backends may register them with the kernel (io_uring fixed
  // buffers); layers pass the hint down. Buffers must outlive the queue.
  virtual void RegisterBuffers(std::span<const iovec> buffers) {}

 protected:
  explicit IoQueue(BlockDevice& device);

  // Starts validated requests. Every request must eventually be passed to Complete() (from this
  // thread) or PostCompletion() (from any thread).
  virtual void DoSubmit(std::span<IoRequest* const> batch) = 0;
  // Makes progress on requests in flight: reap lower completions, retry deferred work. If
  // `wait`, may block until something completes, but not once something has: a request it
  // completed itself (retried work) must not wait (see has_completions()). The default does
  // nothing.
  virtual void DoPoll(bool wait) {}
  // True if requests of this queue were completed (Complete, PostCompletion) whose callbacks
  // have not run yet: Poll runs them as soon as DoPoll returns, so DoPoll must not block.
  bool has_completions() const {
    return done_head_ != nullptr || has_posted_.load(std::memory_order_acquire);
  }

  // Completes `req` with `status`. Owner thread only. The callback runs later in this
  // Submit/Poll call, never inside Complete itself.
  void Complete(IoRequest& req, std::error_code status) {
    req.status = status;
    if (stats_.latency()) LinkTime(req);
    PushCompletion(req);
  }
  // Completes `req` successfully (the same as Complete(req, {}), without constructing the code).
  void Complete(IoRequest& req) { Complete(req, NoError()); }
  // Completes `req` from another thread (e.g. a group commit done by another queue's thread).
  // The callback runs on the owner thread during its next Poll.
  void PostCompletion(IoRequest& req, std::error_code status);

  // Bumps this layer's counter `id` (declared with BlockDevice::DeclareCounters).
  void Count(size_t id, uint64_t n = 1) { stats_.Count(id, n); }

 private:
  friend class BlockDevice;
  struct Child;
  struct Fanout;

  friend class LayerQueue;  // SubmitForwarded

  // Submit; `forwarded`: the requests come unchanged from a layer above whose buffer checks
  // imply this device's (LayerQueue::SubmitForwarded): their buffers are not walked again.
  void SubmitBatch(std::span<IoRequest* const> batch, bool forwarded);
  // The common request, checked inline: a read or write (with one buffer, unless `forwarded`)
  // that Validate accepts and that needs no emulation. False sends it down the full path
  // (Validate, NeedsEmulation), which decides.
  bool IsPlain(const IoRequest& r, bool forwarded) const;
  // The bookkeeping of a request this queue accepts: in flight, counted, timed when `now` is
  // not 0 (this queue keeps latency), its callback to run under `submitter_tag`.
  void Admit(IoRequest& r, uint64_t now, CpuAccount* submitter_tag);
  std::error_code Validate(const IoRequest& req) const;
  // Complete()'s latency part: takes the time of the lower request whose callback is running.
  void LinkTime(IoRequest& req);
  void CompleteTimed(IoRequest& r, uint64_t& batch_now, uint64_t& last, bool own);
  static int LevelOf(const BlockDevice& device);
  bool NeedsEmulation(const IoRequest& req) const;
  void Emulate(IoRequest& req, std::vector<IoRequest*>& out);
  void AddSplitChildren(Fanout* fan, IoRequest& req, uint64_t chunk, std::vector<IoRequest*>& out);
  Child* NewChild(Fanout* fan, Op op, IoFlags flags, uint64_t offset, uint64_t length);
  static void OnChildDone(IoRequest& child);
  void FinishFanout(Fanout* fan);
  void PushCompletion(IoRequest& req) {
    req.next_ = nullptr;
    if (done_tail_) {
      done_tail_->next_ = &req;
    } else {
      done_head_ = &req;
    }
    done_tail_ = &req;
  }
  void MovePosted();
  size_t Drain();
  // Runs the callback of a caller's request as its submitter's code (IoRequest::cpu_tag_), then
  // tags the thread with this device again.
  void RunCallback(IoRequest& r);

  BlockDevice& device_;
  QueueStats stats_;
  const int level_;  // devices below this one (0: a backend), for IoRequest::path_ns_
  // The device's fixed rules, for IsPlain (geometry and capabilities do not change while a
  // queue exists; only the size does).
  const uint64_t block_mask_;    // logical_block - 1
  const uint64_t mem_mask_;      // mem_alignment - 1
  const uint64_t max_transfer_;  // UINT64_MAX if unlimited
  const IoFlags write_flags_;    // flags a plain write may carry: kIoFua if native, else none
  const bool writable_;
  CpuAccount* const cpu_tag_;    // the device's CPU account: the thread's tag in its code
  uint64_t in_flight_ = 0;
  bool draining_ = false;
  IoRequest* done_head_ = nullptr;  // completed, callbacks pending (FIFO)
  IoRequest* done_tail_ = nullptr;
  std::vector<IoRequest*> scratch_;
  std::vector<IoRequest*> plugged_;  // submitted by callbacks during Drain; see Submit()
  std::vector<std::unique_ptr<Child>> free_children_;
  std::vector<std::unique_ptr<Fanout>> free_fanouts_;

  std::atomic<bool> has_posted_{false};
  std::mutex posted_mu_;
  std::vector<IoRequest*> posted_;  // guarded by posted_mu_
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_BLOCK_DEVICE_H_
