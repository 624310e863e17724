// The dedup data path: cuts requests into grains and drives each grain through the engine
// (dedup_engine.h) with asynchronous I/O on the queue below. A grain operation is a small state
// machine:
//
//   write, whole grain:   zero test + fingerprint -> claim -> [verify read] -> [data write]
//   write, partial grain: lock + read old grain (read-modify-write) -> merge -> claim -> ...
//   write-zeroes/discard: whole grains are remapped to zero; partial grains are merged zeros
//   read:                 look up (pinning) -> one lower read per run of consecutive grains
//
// A claim that finds its grain locked by another write, or an identical grain still being
// written, parks the operation; DoPoll retries parked operations. Flush commits the metadata
// (MetaStore) synchronously, as fdatasync does in the file backend.
#include <cassert>
#include <cstring>

#include "blockdev/dedup/dedup_device.h"
#include "blockdev/metastore/grain_io.h"
#include "blockdev/metastore/grain_queue.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"

namespace vstack {
namespace {

using Claim = DedupEngine::Claim;

class DedupQueue final : public GrainQueue {
 public:
  DedupQueue(DedupDevice& dev, std::unique_ptr<IoQueue> lower)
      : GrainQueue(dev, std::move(lower)),
        dev_(dev),
        eng_(dev.engine()),
        grain_(dev.grain()),
        align_(std::max<uint64_t>(4096, dev.lower_device().geometry().mem_alignment)),
        lower_align_(dev.lower_device().geometry().mem_alignment),
        buffers_(grain_, align_) {}

 protected:
  void BeforeBatch() override;
  Status CommitForFlush() override { return dev_.Commit(); }
  void DoPoll(bool wait) override;

 private:
  // One caller's request, completed when its last grain operation finishes.
  struct Ctx {
    IoRequest* parent = nullptr;
    uint32_t pending = 0;
    std::error_code error;
  };

  enum class Step { kStart, kRmwRead, kClaim, kVerifyRead, kWrite };

  // One grain of a write, write-zeroes or discard.
  struct GrainOp {
    DedupQueue* q = nullptr;
    Ctx* ctx = nullptr;
    Op op = Op::kWrite;      // kWrite or kWriteZeroes (discards too)
    bool unmap = false;      // the grain becomes unmapped rather than zero
    uint64_t v = 0;          // virtual grain
    uint32_t in_off = 0;     // bytes of the grain this operation covers
    uint32_t len = 0;
    uint64_t iov_off = 0;    // where those bytes are in the caller's iovecs (writes)
    Step step = Step::kStart;
    bool locked = false;     // holds v's lock (read-modify-write)
    bool commit_tried = false;
    bool zero = false;
    Fingerprint fp;
    uint32_t pgrain = 0;     // the old grain (RMW read), candidate (verify) or target (write)
    AlignedBuffer* buf = nullptr;   // the grain's new content, when not the caller's buffer
    AlignedBuffer* vbuf = nullptr;  // the candidate's content (verify)
    IoRequest lower;
    std::vector<iovec> iov;
  };

  // One lower read covering consecutive physical grains.
  struct ReadRun {
    DedupQueue* q = nullptr;
    Ctx* ctx = nullptr;
    uint32_t first_pgrain = 0;
    uint32_t pgrains = 0;
    uint64_t iov_off = 0;  // where the run's bytes go in the caller's iovecs
    AlignedBuffer* bounce = nullptr;  // when the caller's buffers do not suit the device below
    IoRequest lower;
    std::vector<iovec> iov;
  };

  const iovec* piov(const GrainOp* op) const { return op->ctx->parent->iov; }
  uint32_t piovcnt(const GrainOp* op) const { return op->ctx->parent->iovcnt; }

  void StartWrite(IoRequest* parent, std::vector<IoRequest*>& out) override;
  void StartRead(IoRequest* parent, std::vector<IoRequest*>& out) override;
  void Run(GrainOp* op, std::vector<IoRequest*>& out);
  void Merge(GrainOp* op, std::vector<IoRequest*>& out);
  void OnClaim(GrainOp* op, DedupEngine::ClaimResult r, std::vector<IoRequest*>& out);
  void IssueRead(GrainOp* op, uint32_t pgrain, AlignedBuffer* into, std::vector<IoRequest*>& out);
  void IssueWrite(GrainOp* op, std::vector<IoRequest*>& out);
  void Continue(GrainOp* op, std::error_code status);
  void Finish(GrainOp* op, std::error_code status);
  void FinishCtx(Ctx* ctx, std::error_code status);
  void Park(GrainOp* op) { parked_.push_back(op); }
  static void OnGrainIo(IoRequest& r);
  static void OnReadRun(IoRequest& r);

  AlignedBuffer* GetBuffer() { return buffers_.Get(); }
  void PutBuffer(AlignedBuffer*& b) { buffers_.Put(b); }

  DedupDevice& dev_;
  DedupEngine& eng_;
  const uint32_t grain_;
  const uint64_t align_;
  const uint64_t lower_align_;
  RequestPool<Ctx> ctxs_;
  RequestPool<GrainOp> ops_;
  RequestPool<ReadRun> runs_;
  BufferPool buffers_;
  std::vector<GrainOp*> parked_;
  bool need_commit_ = false;
};

void DedupQueue::BeforeBatch() {
  if (eng_.pending_bytes() > dev_.commit_threshold()) (void)dev_.Commit();
}

void DedupQueue::DoPoll(bool wait) {
  if (need_commit_) {
    need_commit_ = false;
    (void)dev_.Commit();  // frees grains released before it; failures surface as kNoSpace
  }
  if (!parked_.empty()) {
    std::vector<GrainOp*> retry;
    retry.swap(parked_);
    std::vector<IoRequest*> out;
    for (GrainOp* op : retry) {
      Count(DedupDevice::kRetries);
      Run(op, out);
    }
    SubmitLower(out);
  }
  LayerQueue::DoPoll(wait);
}

void DedupQueue::StartWrite(IoRequest* parent, std::vector<IoRequest*>& out) {
  if (RejectSlowFastZero(parent, grain_)) return;  // zeroing part of a grain is a RMW
  Ctx* ctx = ctxs_.Get();
  *ctx = Ctx{parent, 1, {}};
  const bool unmap = parent->op == Op::kDiscard ||
                     (parent->op == Op::kWriteZeroes && (parent->flags & kIoMayUnmap));
  for (uint64_t pos = parent->offset; pos < parent->offset + parent->length;) {
    const uint64_t v = pos / grain_;
    const uint32_t in_off = static_cast<uint32_t>(pos % grain_);
    const uint32_t len = static_cast<uint32_t>(
        std::min<uint64_t>(grain_ - in_off, parent->offset + parent->length - pos));
    GrainOp* op = ops_.Get();
    op->q = this;
    op->ctx = ctx;
    op->op = parent->op == Op::kWrite ? Op::kWrite : Op::kWriteZeroes;
    op->unmap = unmap;
    op->v = v;
    op->in_off = in_off;
    op->len = len;
    op->iov_off = pos - parent->offset;
    op->step = Step::kStart;
    op->locked = op->commit_tried = op->zero = false;
    op->buf = op->vbuf = nullptr;
    ++ctx->pending;
    Run(op, out);
    pos += len;
  }
  FinishCtx(ctx, {});
}

void DedupQueue::Run(GrainOp* op, std::vector<IoRequest*>& out) {
  if (op->step == Step::kClaim) {
    OnClaim(op, eng_.ClaimWrite(op->v, op->zero, op->fp, dev_.verify(), op->locked), out);
    return;
  }
  assert(op->step == Step::kStart);
  const bool whole = op->len == grain_;
  if (whole && op->op == Op::kWriteZeroes) {
    if (eng_.SetZero(op->v, op->unmap, false) == Claim::kBusy) return Park(op);
    Count(DedupDevice::kZeroGrains);
    return Finish(op, {});
  }
  if (whole) {
    const iovec* iov = piov(op);
    const uint32_t cnt = piovcnt(op);
    op->zero = !ClassifyGrainIov(iov, cnt, op->iov_off, grain_, &op->fp);
    if (!op->zero && !SliceAligned(iov, cnt, op->iov_off, grain_, lower_align_)) {
      // The caller's buffer cannot go to the device below as it is: write from a copy.
      op->buf = GetBuffer();
      CopyFromIov(iov, cnt, op->iov_off, op->buf->data(), grain_);
    }
    op->step = Step::kClaim;
    OnClaim(op, eng_.ClaimWrite(op->v, op->zero, op->fp, dev_.verify(), false), out);
    return;
  }
  uint32_t entry;
  if (!eng_.LockForRmw(op->v, &entry)) return Park(op);
  op->locked = true;
  op->buf = GetBuffer();
  if (entry >= DedupEngine::kFirstGrain) {
    op->step = Step::kRmwRead;
    Count(DedupDevice::kRmwReads);
    IssueRead(op, entry - DedupEngine::kFirstGrain, op->buf, out);
    return;
  }
  std::memset(op->buf->data(), 0, grain_);
  Merge(op, out);
}

void DedupQueue::Merge(GrainOp* op, std::vector<IoRequest*>& out) {
  std::byte* b = op->buf->data();
  if (op->op == Op::kWrite) {
    CopyFromIov(piov(op), piovcnt(op), op->iov_off, b + op->in_off, op->len);
  } else {
    std::memset(b + op->in_off, 0, op->len);
  }
  op->zero = !ClassifyGrain(b, grain_, &op->fp);
  op->step = Step::kClaim;
  OnClaim(op, eng_.ClaimWrite(op->v, op->zero, op->fp, dev_.verify(), true), out);
}

void DedupQueue::OnClaim(GrainOp* op, DedupEngine::ClaimResult r, std::vector<IoRequest*>& out) {
  switch (r.what) {
    case Claim::kDone:
      op->locked = false;
      Count(op->zero ? DedupDevice::kZeroGrains : DedupDevice::kDedupHits);
      return Finish(op, {});
    case Claim::kBusy:
      return Park(op);
    case Claim::kVerify:
      op->locked = true;
      op->step = Step::kVerifyRead;
      op->vbuf = GetBuffer();
      Count(DedupDevice::kVerifyReads);
      return IssueRead(op, r.pgrain, op->vbuf, out);
    case Claim::kWrite:
      op->locked = true;
      op->pgrain = r.pgrain;
      op->step = Step::kWrite;
      Count(DedupDevice::kUniqueWrites);
      return IssueWrite(op, out);
    case Claim::kNoSpace:
      op->locked = false;
      if (!op->commit_tried && eng_.pending_frees() > 0) {
        // Grains released since the last commit become free once it is durable: commit, then
        // start this grain over.
        op->commit_tried = true;
        need_commit_ = true;
        op->step = Step::kStart;
        PutBuffer(op->buf);
        return Park(op);
      }
      return Finish(op, Errc::kNoSpace);
  }
}

void DedupQueue::IssueRead(GrainOp* op, uint32_t pgrain, AlignedBuffer* into,
                           std::vector<IoRequest*>& out) {
  op->pgrain = pgrain;
  op->iov.assign(1, iovec{into->data(), grain_});
  op->lower = IoRequest{};
  op->lower.op = Op::kRead;
  op->lower.offset = dev_.data_offset() + uint64_t{pgrain} * grain_;
  op->lower.length = grain_;
  op->lower.iov = op->iov.data();
  op->lower.iovcnt = 1;
  op->lower.on_complete = &DedupQueue::OnGrainIo;
  op->lower.user_data = op;
  out.push_back(&op->lower);
}

void DedupQueue::IssueWrite(GrainOp* op, std::vector<IoRequest*>& out) {
  op->iov.clear();
  if (op->buf) {
    op->iov.push_back(iovec{op->buf->data(), grain_});
  } else {
    IovSlice(piov(op), piovcnt(op), op->iov_off, grain_, &op->iov);
  }
  op->lower = IoRequest{};
  op->lower.op = Op::kWrite;
  op->lower.offset = dev_.data_offset() + uint64_t{op->pgrain} * grain_;
  op->lower.length = grain_;
  op->lower.iov = op->iov.data();
  op->lower.iovcnt = static_cast<uint32_t>(op->iov.size());
  op->lower.on_complete = &DedupQueue::OnGrainIo;
  op->lower.user_data = op;
  out.push_back(&op->lower);
}

void DedupQueue::OnGrainIo(IoRequest& r) {
  GrainOp* op = static_cast<GrainOp*>(r.user_data);
  op->q->Continue(op, r.status);
}

void DedupQueue::Continue(GrainOp* op, std::error_code status) {
  std::vector<IoRequest*> out;
  switch (op->step) {
    case Step::kRmwRead:
      eng_.Unpin(op->pgrain);
      if (status) {
        eng_.Unlock(op->v);
        op->locked = false;
        Finish(op, status);
      } else {
        Merge(op, out);
      }
      break;
    case Step::kVerifyRead: {
      const void* candidate = op->vbuf->data();
      bool equal = false;
      if (!status) {
        equal = op->buf ? std::memcmp(candidate, op->buf->data(), grain_) == 0
                        : EqualsIov(candidate, piov(op), piovcnt(op), op->iov_off, grain_);
        if (!equal) Count(DedupDevice::kCollisions);
      }
      PutBuffer(op->vbuf);
      // A failed read of the candidate is treated as a mismatch: store the grain anew.
      OnClaim(op, eng_.FinishVerify(op->v, op->pgrain, op->fp, equal), out);
      break;
    }
    case Step::kWrite:
      eng_.FinishWrite(op->v, op->pgrain, op->fp, !status);
      op->locked = false;
      Finish(op, status);
      break;
    default:
      assert(false && "no I/O in this step");
  }
  SubmitLower(out);
}

void DedupQueue::Finish(GrainOp* op, std::error_code status) {
  Ctx* ctx = op->ctx;
  PutBuffer(op->buf);
  PutBuffer(op->vbuf);
  ops_.Put(op);
  FinishCtx(ctx, status);
}

void DedupQueue::FinishCtx(Ctx* ctx, std::error_code status) {
  if (status && !ctx->error) ctx->error = status;
  if (--ctx->pending > 0) return;
  IoRequest* parent = ctx->parent;
  const std::error_code error = ctx->error;
  ctxs_.Put(ctx);
  Complete(*parent, error);
}

void DedupQueue::StartRead(IoRequest* parent, std::vector<IoRequest*>& out) {
  Ctx* ctx = ctxs_.Get();
  *ctx = Ctx{parent, 1, {}};
  const uint64_t first = parent->offset / grain_;
  const uint64_t last = (parent->offset + parent->length - 1) / grain_;
  std::vector<uint32_t> entries;
  eng_.LookupForRead(first, last - first + 1, &entries);
  ReadRun* run = nullptr;
  uint64_t run_end = 0;  // physical byte offset where the current run ends
  auto close_run = [&] {
    if (run == nullptr) return;
    run->lower.length = run_end - run->lower.offset;
    if (SliceAligned(parent->iov, parent->iovcnt, run->iov_off, run->lower.length, lower_align_)) {
      IovSlice(parent->iov, parent->iovcnt, run->iov_off, run->lower.length, &run->iov);
    } else {
      run->bounce = new AlignedBuffer(run->lower.length, align_);
      run->iov.push_back(run->bounce->iov());
    }
    run->lower.iov = run->iov.data();
    run->lower.iovcnt = static_cast<uint32_t>(run->iov.size());
    ++ctx->pending;
    out.push_back(&run->lower);
    run = nullptr;
  };
  for (uint64_t pos = parent->offset; pos < parent->offset + parent->length;) {
    const uint64_t v = pos / grain_;
    const uint32_t in_off = static_cast<uint32_t>(pos % grain_);
    const uint32_t len = static_cast<uint32_t>(
        std::min<uint64_t>(grain_ - in_off, parent->offset + parent->length - pos));
    const uint32_t e = entries[v - first];
    if (e < DedupEngine::kFirstGrain) {
      close_run();
      ZeroIov(parent->iov, parent->iovcnt, pos - parent->offset, len);
    } else {
      const uint32_t p = e - DedupEngine::kFirstGrain;
      const uint64_t phys = dev_.data_offset() + uint64_t{p} * grain_ + in_off;
      if (run && run_end == phys && p == run->first_pgrain + run->pgrains) {
        ++run->pgrains;
      } else {
        close_run();
        run = runs_.Get();
        run->q = this;
        run->ctx = ctx;
        run->first_pgrain = p;
        run->pgrains = 1;
        run->iov_off = pos - parent->offset;
        run->bounce = nullptr;
        run->iov.clear();
        run->lower = IoRequest{};
        run->lower.op = Op::kRead;
        run->lower.offset = phys;
        run->lower.on_complete = &DedupQueue::OnReadRun;
        run->lower.user_data = run;
      }
      run_end = phys + len;
    }
    pos += len;
  }
  close_run();
  FinishCtx(ctx, {});
}

void DedupQueue::OnReadRun(IoRequest& r) {
  ReadRun* run = static_cast<ReadRun*>(r.user_data);
  DedupQueue* q = run->q;
  q->eng_.UnpinRange(run->first_pgrain, run->pgrains);
  if (run->bounce) {
    if (!r.status) {
      IoRequest* parent = run->ctx->parent;
      CopyToIov(parent->iov, parent->iovcnt, run->iov_off, run->bounce->data(), r.length);
    }
    delete run->bounce;
    run->bounce = nullptr;
  }
  Ctx* ctx = run->ctx;
  q->runs_.Put(run);
  q->FinishCtx(ctx, r.status);
}

}  // namespace

std::unique_ptr<IoQueue> NewDedupQueue(DedupDevice& device, std::unique_ptr<IoQueue> lower) {
  return std::make_unique<DedupQueue>(device, std::move(lower));
}

}  // namespace vstack
