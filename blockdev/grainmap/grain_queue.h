// GrainQueue: the queue of a grain layer (dedup, zstd, crc32c). It owns the request loop and
// everything around the per-grain work, which the layer supplies through a few hooks:
//
//  - the loop: a flush commits the layer's metadata (CommitForFlush) and completes when that
//    commit has; every other request is started by the layer (StartRead, StartWrite), which
//    appends the lower requests it needs to `out`; a batch's lower requests go down in one
//    Submit. A completion callback may submit again (the loop is re-entrant).
//  - blocking: a commit blocks the thread (metadata I/O on the layer's own queue of the device
//    below, the commit lock). Before it does, the queue waits until nothing it sent down is in
//    flight (QuiesceBelow), as the device contract asks (docs/design.md, "Progress").
//  - cutting into grains: ForEachGrain; CutWrite makes one GrainWrite per grain of a write,
//    write-zeroes or discard and hands it to the layer;
//  - completion: a caller's request is a PendingParent (lib/parent_completion.h) counting its
//    grain operations and lower reads; FinishParent completes it after the last one;
//  - parking and retry: an operation that must wait (its grain is locked by another write, or
//    space comes back only after a commit) is parked; DoPoll commits if asked to
//    (RequestCommit), then hands every parked operation back to the layer (Retry);
//  - read runs: one lower read per run of consecutive stored units, straight into the
//    caller's buffers when they suit the device below, else through a bounce buffer.
// Hooks are called once per request or per grain, never per byte; no allocation per request
// once the pools are warm.
#ifndef VSTACK_BLOCKDEV_GRAINMAP_GRAIN_QUEUE_H_
#define VSTACK_BLOCKDEV_GRAINMAP_GRAIN_QUEUE_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "blockdev/metastore/grain_io.h"
#include "lib/aligned_buffer.h"
#include "lib/historical_bug.h"
#include "lib/layer.h"
#include "lib/parent_completion.h"

namespace vstack {

// Calls fn(v, in_off, len, rel) for each grain that bytes [offset, offset+length) touch: the
// virtual grain v, the bytes [in_off, in_off+len) of it, at byte `rel` of the request.
template <typename Fn>
inline void ForEachGrain(uint64_t offset, uint64_t length, uint32_t grain, Fn fn) {
  const uint64_t end = offset + length;
  for (uint64_t pos = offset; pos < end;) {
    const uint32_t in_off = static_cast<uint32_t>(pos % grain);
    const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(grain - in_off, end - pos));
    fn(pos / grain, in_off, len, pos - offset);
    pos += len;
  }
}

class GrainQueue : public LayerQueue {
 public:
  static constexpr size_t kNoCounter = std::numeric_limits<size_t>::max();

  // `grain`: the layer's grain; `retries_counter`: the layer's counter of retried operations
  // (kNoCounter: none).
  GrainQueue(BlockDevice& owner, std::unique_ptr<IoQueue> lower, uint32_t grain,
             size_t retries_counter = kNoCounter);

 protected:
  // Something a layer parks. `kind` tells a layer that parks several kinds which one it is.
  struct Waiter {
    int kind = 0;
  };

  // One grain of a write, write-zeroes or discard: what every grain layer needs to know.
  struct GrainWrite : Waiter {
    PendingParent* ctx = nullptr;
    Op op = Op::kWrite;      // kWrite or kWriteZeroes (discards too)
    bool unmap = false;      // the grain becomes unmapped rather than zero
    uint64_t v = 0;          // virtual grain
    uint32_t in_off = 0;     // bytes of the grain this operation covers
    uint32_t len = 0;
    uint64_t iov_off = 0;    // where those bytes are in the caller's iovecs (writes)
    bool locked = false;     // holds v's lock
    bool commit_tried = false;
    const iovec* piov() const { return ctx->parent()->iov; }
    uint32_t piovcnt() const { return ctx->parent()->iovcnt; }
  };

  // One lower read of consecutive stored units [first_unit, first_unit+units).
  struct ReadRun : Waiter {
    GrainQueue* q = nullptr;
    PendingParent* ctx = nullptr;
    uint64_t first_unit = 0;
    uint32_t units = 0;
    uint64_t iov_off = 0;  // where the run's bytes go in the caller's iovecs
    uint64_t length = 0;   // bytes for the caller
    AlignedBuffer* bounce = nullptr;  // when the caller's buffers do not suit the device below
    IoRequest lower;
    std::vector<iovec> iov;
  };

  // ---- Hooks.
  // Called once per batch, before any request of it starts (e.g. to commit when enough
  // metadata is pending; QuiesceBelow first).
  virtual void BeforeBatch() {}
  // Makes every completed write's metadata durable (the flush). The loop calls it (and
  // CommitToMakeRoom) after QuiesceBelow.
  virtual Status CommitForFlush() = 0;
  // Commits and gives back to the device below the space of everything this layer has freed
  // (after a write below failed for lack of space). The default: CommitForFlush.
  virtual Status CommitToMakeRoom() { return CommitForFlush(); }
  virtual void StartRead(IoRequest* parent, std::vector<IoRequest*>& out) = 0;
  // kWrite, kWriteZeroes and kDiscard.
  virtual void StartWrite(IoRequest* parent, std::vector<IoRequest*>& out) = 0;
  // Runs a parked operation again (from DoPoll).
  virtual void Retry(Waiter* w, std::vector<IoRequest*>& out) {}

  // ---- Helpers.
  // A grain-sized buffer from this queue's pool, and back (Put clears the pointer).
  AlignedBuffer* GetBuffer() { return buffers_.Get(); }
  void PutBuffer(AlignedBuffer*& b) { buffers_.Put(b); }
  // Polls the queue below until nothing this queue sent down is in flight. Call it before
  // blocking the thread (a commit, a synchronous metadata write, a lock that a committing
  // thread holds): the device below may finish another queue's request only after this queue
  // has been polled again (a dynamic VHD's bitmap write or group commit that this queue
  // issued), and that other queue may be the one the commit is waiting for.
  // REQUIRES: not called from a completion callback of the queue below.
  // (HistoricalBug::kCommitWithoutQuiesce skips it, for the simulator's test.)
  void QuiesceBelow() {
    if (!Reintroduced(HistoricalBug::kCommitWithoutQuiesce)) lower().WaitIdle();
  }
  // Completes a write-zeroes that asks to be fast but covers part of a grain (a
  // read-modify-write is not fast) with kNotSupported, and returns true; else false.
  bool RejectSlowFastZero(IoRequest* parent);
  void SubmitLower(std::vector<IoRequest*>& out) {
    if (!out.empty()) lower().Submit(out);
  }

  // A caller's request with `pending` pieces outstanding.
  PendingParent* NewParent(IoRequest* parent, uint32_t pending) {
    PendingParent* p = parents_.Get();
    p->Start(parent, pending);
    return p;
  }
  // One piece of `p` finished with `status`; completes the caller's request after the last.
  void FinishParent(PendingParent* p, std::error_code status) {
    if (!p->Done(status)) return;
    IoRequest* parent = p->parent();
    const std::error_code error = p->error();
    parents_.Put(p);
    Complete(*parent, error);
  }

  // Cuts a write, write-zeroes or discard into one operation per grain: takes each from `ops`,
  // fills its GrainWrite fields and calls run(op) (which resets the layer's own fields and
  // starts it). Completes the caller's request once every operation has called FinishParent.
  template <class OpT, class Run>
  void CutWrite(IoRequest* parent, RequestPool<OpT>& ops, Run run) {
    PendingParent* ctx = NewParent(parent, 1);  // 1: held while cutting
    const Op op = parent->op == Op::kWrite ? Op::kWrite : Op::kWriteZeroes;
    const bool unmap = parent->op == Op::kDiscard ||
                       (parent->op == Op::kWriteZeroes && (parent->flags & kIoMayUnmap));
    ForEachGrain(parent->offset, parent->length, grain_,
                 [&](uint64_t v, uint32_t in_off, uint32_t len, uint64_t rel) {
                   OpT* o = ops.Get();
                   GrainWrite& w = *o;
                   w.ctx = ctx;
                   w.op = op;
                   w.unmap = unmap;
                   w.v = v;
                   w.in_off = in_off;
                   w.len = len;
                   w.iov_off = rel;
                   w.locked = w.commit_tried = false;
                   ctx->Add();
                   run(o);
                 });
    FinishParent(ctx, {});
  }

  // Parks `w` until the next DoPoll.
  void Park(Waiter* w) { parked_.push_back(w); }
  // Asks the next DoPoll to commit first (units released since the last commit come back);
  // with `make_room`, through CommitToMakeRoom (the device below ran out of space).
  void RequestCommit(bool make_room = false) {
    need_commit_ = true;
    make_room_ = make_room_ || make_room;
  }
  // Commits if asked to, retries every parked operation, then polls the device below.
  void DoPoll(bool wait) override;

  // Starts `run` (its lower request a read) at unit `first_unit`, lower offset `offset`, for
  // the caller's bytes at `iov_off`. Extend it with run->units++ and run->length += n.
  ReadRun* NewRun(PendingParent* ctx, uint64_t first_unit, uint64_t offset, uint64_t iov_off,
                  void (*on_complete)(IoRequest&));
  // Sends `run` down: into the caller's buffers if they suit the device below, else into a
  // bounce buffer.
  void IssueRun(ReadRun* run, std::vector<IoRequest*>& out);
  // After `run`'s read: copies its bounce buffer to the caller (if it succeeded), frees it,
  // and finishes the run's share of its caller's request.
  void FinishRun(ReadRun* run, std::error_code status);

  void DoSubmit(std::span<IoRequest* const> batch) final;

  const uint32_t grain_;
  const uint64_t lower_align_;  // memory alignment the device below needs
  const uint64_t align_;        // of this queue's buffers: lower_align_, at least 4 KiB
  BufferPool buffers_;

 private:
  const size_t retries_counter_;
  std::vector<IoRequest*> scratch_;
  RequestPool<PendingParent> parents_;
  RequestPool<ReadRun> runs_;
  std::vector<Waiter*> parked_;
  bool need_commit_ = false;
  bool make_room_ = false;
};

// The queue of a MappedLayer (dedup, zstd): commits through the device, before a batch when
// enough metadata is pending and at a flush.
template <class Device>
class MappedQueue : public GrainQueue {
 protected:
  MappedQueue(Device& dev, std::unique_ptr<IoQueue> lower, size_t retries_counter)
      : GrainQueue(dev, std::move(lower), dev.grain(), retries_counter),
        dev_(dev),
        eng_(dev.engine()) {}

  void BeforeBatch() override {
    if (!dev_.commit_due()) return;
    QuiesceBelow();
    (void)dev_.Commit();
  }
  Status CommitForFlush() override { return dev_.Commit(); }
  Status CommitToMakeRoom() override { return dev_.Commit(/*discard_all=*/true); }

  // Reads `parent`: looks its grains up (pinning their units), then for each grain
  // whole_unit(entry, &unit) says whether it is stored whole in `unit` (read with one lower
  // request per run of consecutive units, unpinned when read); any other grain is the layer's:
  // other(ctx, entry, in_off, len, rel) zeroes it or reads it (counting its reads in ctx).
  template <class WholeUnit, class Other>
  void ReadGrains(IoRequest* parent, std::vector<IoRequest*>& out, WholeUnit whole_unit,
                  Other other) {
    PendingParent* ctx = NewParent(parent, 1);  // 1: held while the reads are issued
    const uint64_t first = parent->offset / grain_;
    const uint64_t last = (parent->offset + parent->length - 1) / grain_;
    std::vector<Entry> entries;
    eng_.LookupForRead(first, last - first + 1, &entries);
    ReadRun* run = nullptr;
    uint64_t run_end = 0;  // lower byte offset where the current run ends
    ForEachGrain(parent->offset, parent->length, grain_,
                 [&](uint64_t v, uint32_t in_off, uint32_t len, uint64_t rel) {
                   const Entry e = entries[v - first];
                   uint64_t unit = 0;
                   const bool whole = whole_unit(e, &unit);
                   const uint64_t phys = dev_.data_offset() + unit * grain_ + in_off;
                   if (whole && run && run_end == phys && unit == run->first_unit + run->units) {
                     ++run->units;
                   } else {
                     if (run) IssueRun(run, out);
                     run = nullptr;
                     if (!whole) return other(ctx, e, in_off, len, rel);
                     run = NewRun(ctx, unit, phys, rel, &MappedQueue::OnRun);
                   }
                   run->length += len;
                   run_end = phys + len;
                 });
    if (run) IssueRun(run, out);
    FinishParent(ctx, {});
  }

  Device& dev_;
  decltype(std::declval<Device&>().engine()) eng_;

 private:
  using Entry = std::remove_const_t<decltype(std::remove_reference_t<decltype(eng_)>::kZero)>;

  static void OnRun(IoRequest& r) {
    ReadRun* run = static_cast<ReadRun*>(r.user_data);
    auto* q = static_cast<MappedQueue*>(run->q);
    q->eng_.UnpinRange(run->first_unit, run->units);
    q->FinishRun(run, r.status);
  }
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_GRAINMAP_GRAIN_QUEUE_H_
