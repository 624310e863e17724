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
// (MetaStore) synchronously, as fdatasync does in the file backend. A data write that the
// device below refuses for lack of space (ENOSPC: a thin device below is full) is parked too:
// DoPoll commits, which frees and discards below every grain this layer no longer uses, and
// writes the grain again, once; if that fails as well, the write fails with the error below.
#include <cassert>
#include <cstring>

#include "blockdev/dedup/dedup_device.h"
#include "blockdev/metastore/grain_io.h"
#include "blockdev/grainmap/grain_queue.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"

namespace vstack {
namespace {

using Claim = DedupEngine::Claim;

class DedupQueue final : public MappedQueue<DedupDevice> {
 public:
  DedupQueue(DedupDevice& dev, std::unique_ptr<IoQueue> lower)
      : MappedQueue(dev, std::move(lower), DedupDevice::kRetries) {}

 private:
  enum class Step { kStart, kRmwRead, kClaim, kVerifyRead, kWrite };

  // One grain of a write, write-zeroes or discard.
  struct GrainOp : GrainWrite {
    DedupQueue* q = nullptr;
    Step step = Step::kStart;
    bool zero = false;
    Fingerprint fp;
    uint32_t pgrain = 0;     // the old grain (RMW read), candidate (verify) or target (write)
    bool room_tried = false;        // retried once after the device below ran out of space
    AlignedBuffer* buf = nullptr;   // the grain's new content, when not the caller's buffer
    AlignedBuffer* vbuf = nullptr;  // the candidate's content (verify)
    IoRequest lower;
    std::vector<iovec> iov;
  };

  const iovec* piov(const GrainOp* op) const { return op->piov(); }
  uint32_t piovcnt(const GrainOp* op) const { return op->piovcnt(); }

  void StartWrite(IoRequest* parent, std::vector<IoRequest*>& out) override;
  void StartRead(IoRequest* parent, std::vector<IoRequest*>& out) override;
  void Run(GrainOp* op, std::vector<IoRequest*>& out);
  void Merge(GrainOp* op, std::vector<IoRequest*>& out);
  void OnClaim(GrainOp* op, DedupEngine::ClaimResult r, std::vector<IoRequest*>& out);
  void IssueRead(GrainOp* op, uint32_t pgrain, AlignedBuffer* into, std::vector<IoRequest*>& out);
  void IssueWrite(GrainOp* op, std::vector<IoRequest*>& out);
  void Continue(GrainOp* op, std::error_code status);
  void Finish(GrainOp* op, std::error_code status);
  void Retry(Waiter* w, std::vector<IoRequest*>& out) override {
    Run(static_cast<GrainOp*>(w), out);
  }
  static void OnGrainIo(IoRequest& r);

  RequestPool<GrainOp> ops_;
};

void DedupQueue::StartWrite(IoRequest* parent, std::vector<IoRequest*>& out) {
  if (RejectSlowFastZero(parent)) return;  // zeroing part of a grain is a RMW
  CutWrite(parent, ops_, [&](GrainOp* op) {
    op->q = this;
    op->step = Step::kStart;
    op->zero = false;
    op->room_tried = false;
    op->buf = op->vbuf = nullptr;
    Run(op, out);
  });
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
        RequestCommit();
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
      if (status == std::errc::no_space_on_device && !op->room_tried) {
        // The device below is full (a thin device): commit, which frees what this layer
        // released and discards every free grain below, then write this grain again, once.
        op->room_tried = true;
        RequestCommit(/*make_room=*/true);
        op->step = Step::kStart;
        PutBuffer(op->buf);
        Park(op);
        break;
      }
      Finish(op, status);
      break;
    default:
      assert(false && "no I/O in this step");
  }
  SubmitLower(out);
}

void DedupQueue::Finish(GrainOp* op, std::error_code status) {
  PendingParent* ctx = op->ctx;
  PutBuffer(op->buf);
  PutBuffer(op->vbuf);
  ops_.Put(op);
  FinishParent(ctx, status);
}

// Mapped grains are read in runs of consecutive physical grains; the others read as zeros.
void DedupQueue::StartRead(IoRequest* parent, std::vector<IoRequest*>& out) {
  ReadGrains(
      parent, out,
      [](uint32_t e, uint64_t* p) {
        *p = e - DedupEngine::kFirstGrain;
        return e >= DedupEngine::kFirstGrain;
      },
      [&](PendingParent*, uint32_t, uint32_t, uint32_t len, uint64_t rel) {
        ZeroIov(parent->iov, parent->iovcnt, rel, len);
      });
}

}  // namespace

std::unique_ptr<IoQueue> NewDedupQueue(DedupDevice& device, std::unique_ptr<IoQueue> lower) {
  return std::make_unique<DedupQueue>(device, std::move(lower));
}

}  // namespace vstack
