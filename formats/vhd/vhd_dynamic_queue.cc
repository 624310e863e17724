// The dynamic VHD queue (vhd_dynamic_queue.h): requests, translation through the BAT, reads
// and data writes below, and hand-offs between queues.
#include "formats/vhd/vhd_dynamic_queue.h"

#include <algorithm>
#include <cstring>

#include "formats/vhd/vhd_bitmap.h"
#include "formats/vhd/vhd_device.h"
#include "lib/cpu_tag.h"
#include "lib/iovec.h"
#include "lib/progress.h"

namespace vstack::vhd {

void DynamicQueue::DoSubmit(std::span<IoRequest* const> batch) {
  DrainInbox();
  for (IoRequest* parent : batch) {
    if (!StartDirect(*parent)) Start(*parent);
  }
  AfterWork();
}

void DynamicQueue::DoPoll(bool wait) {
  bool did = DrainInbox();
  if (did) AfterWork();
  const bool parent_busy = parent_ != nullptr && parent_->in_flight() > 0;
  if (parent_busy) {
    // Only one of the two queues can be waited on: wait on the parent's when the file has
    // nothing in flight; with both busy, poll both, and if neither had anything, wait through
    // the progress seam (a yield, not a hard spin).
    const bool lower_busy = lower().in_flight() > 0;
    size_t got = parent_->Poll(wait && !did && !lower_busy ? 1 : 0);
    if (lower_busy) got += lower().Poll(0);
    if (wait && !did && lower_busy && got == 0) {
      WaitForProgress("vhd: requests in flight on both the file and the parent");
    }
  } else if (lower().in_flight() > 0) {
    lower().Poll(wait && !did ? 1 : 0);
  } else {
    lower().Poll(0);
    if (wait && !did) WaitForProgress("vhd: a piece waits for another queue's metadata I/O");
  }
  if (DrainInbox()) AfterWork();
}

bool DynamicQueue::StartDirect(IoRequest& parent) {
  if (parent.op != Op::kRead && parent.op != Op::kWrite && parent.op != Op::kWriteZeroes) {
    return false;
  }
  internal::PhaseScope index(device(), CpuPhase::kIndex);
  const uint64_t in_block = parent.offset % st_.block_size;
  if (parent.length > st_.block_size - in_block) return false;  // more than one piece
  const auto block = static_cast<uint32_t>(parent.offset / st_.block_size);
  // Translate's lock-free test: the entry, then the flags published before it.
  const uint32_t entry = st_.bat.entry(block);
  if (entry == kUnallocated) return false;
  const uint8_t flags = st_.bat.flags(block);
  if ((flags & Bat::kUnusable) || !((flags & Bat::kFull) || parent.op == Op::kWriteZeroes)) {
    return false;
  }
  Count(kCounterBatLookups);
  if (parent.op == Op::kRead) Count(kCounterDataReads);
  // NewOp(Kind::kDirect), setting each field once: a kDirect op uses no other field.
  LowerOp* op = ops_.Get();
  op->queue = this;
  op->kind = Kind::kDirect;
  op->parent = &parent;
  op->req.op = parent.op;
  op->req.flags = parent.flags & (kIoMayUnmap | kIoFastZero);
  op->req.offset = uint64_t{entry} * kSectorSize + st_.bitmap_bytes + in_block;
  op->req.length = parent.length;
  const bool buffers = parent.op != Op::kWriteZeroes;  // the caller's, as they are
  op->req.iov = buffers ? parent.iov : nullptr;
  op->req.iovcnt = buffers ? parent.iovcnt : 0;
  op->req.on_complete = &DynamicQueue::OnLowerDone;
  op->req.user_data = op;
  Issue(op);
  return true;
}

void DynamicQueue::Start(IoRequest& parent) {
  if (parent.op == Op::kFlush) {
    LowerOp* op = NewOp(Kind::kDirect);
    op->parent = &parent;
    op->req.op = Op::kFlush;
    Issue(op);
    return;
  }
  if (parent.op == Op::kDiscard) {  // not claimed; Submit rejects it before we see it
    Complete(parent, make_error_code(Errc::kNotSupported));
    return;
  }
  Request* r = NewRequest();
  const uint64_t end = parent.offset + parent.length;
  for (uint64_t pos = parent.offset; pos < end;) {
    const uint64_t block = pos / st_.block_size;
    const uint64_t in_block = pos % st_.block_size;
    const uint64_t n = std::min<uint64_t>(st_.block_size - in_block, end - pos);
    r->pieces.push_back(Piece{r, static_cast<uint32_t>(block),
                              static_cast<uint32_t>(in_block / kSectorSize),
                              static_cast<uint32_t>(n / kSectorSize), pos - parent.offset});
    pos += n;
  }
  // One unit per piece, plus one held while translating so the request cannot finish
  // (on this or another thread) before the loop is done.
  r->done.Start(&parent, static_cast<uint32_t>(r->pieces.size()) + 1);
  for (Piece& p : r->pieces) Translate(&p);
  Finish(r, NoError());
}

Request* DynamicQueue::NewRequest() {
  Request* r = requests_.Get();
  r->owner = this;
  r->pieces.clear();
  return r;
}

void DynamicQueue::Finish(Request* r, std::error_code ec) {
  if (!r->done.Done(ec)) return;
  IoRequest* parent = r->done.parent();
  const std::error_code status = r->done.error();
  DynamicQueue* owner = r->owner;
  if (owner == this) {
    Complete(*parent, status);
    requests_.Put(r);
  } else {
    owner->Give(r);
    owner->PostCompletion(*parent, status);  // `owner` may be gone after this
  }
}

void DynamicQueue::Translate(Piece* p) {
  internal::PhaseScope index(device(), CpuPhase::kIndex);
  Request* r = p->req;
  const Op op = r->done.parent()->op;
  Count(kCounterBatLookups);
  uint32_t entry = st_.bat.entry(p->block);
  if (entry != kUnallocated) {
    const uint8_t flags = st_.bat.flags(p->block);
    if (flags & Bat::kUnusable) {
      Finish(r, make_error_code(Errc::kCorruption));
      return;
    }
    if ((flags & Bat::kFull) || op == Op::kWriteZeroes) {
      // Zeroing an allocated range keeps the bitmap as it is: set bits now hold zeros, clear
      // bits were zeros already.
      IssueData(p, entry, p->first, p->count);
      return;
    }
  } else if (op != Op::kWrite) {
    ZeroPiece(p);
    return;
  }

  std::unique_lock lock(st_.mu);
  entry = st_.bat.entry(p->block);
  if (entry == kUnallocated) {
    if (op != Op::kWrite) {  // an allocation is in flight: reading zeros (old data) is right
      lock.unlock();
      ZeroPiece(p);
      return;
    }
    JoinAllocation(p);
    return;
  }
  if (st_.bat.flags(p->block) & Bat::kFull) {
    lock.unlock();
    IssueData(p, entry, p->first, p->count);
    return;
  }
  std::unique_ptr<BitmapState>& slot = st_.bitmaps[p->block];
  if (!slot) {
    slot = std::make_unique<BitmapState>();
    st_.EvictIdleBitmaps();  // never this one: it is not loaded yet
  }
  BitmapState& bs = *slot;
  if (!bs.loaded) {
    bs.wait_load.push_back(p);
    if (bs.loading) {
      Count(kCounterWaits);
      return;
    }
    bs.loading = true;
    lock.unlock();
    IssueBitmapRead(p->block, entry);
    return;
  }
  if (op == Op::kRead) {
    // Sectors whose bit is clear read as zeros (the spec says they are zeros on disk, but
    // other writers leave garbage there).
    runs_.clear();
    for (uint32_t s = p->first, end = p->first + p->count; s < end;) {
      const uint32_t n = RunLength(bs.mem.data(), s, end);
      runs_.push_back({s, n, TestBit(bs.mem.data(), s)});
      s += n;
    }
    lock.unlock();
    ReadRuns(p);
    return;
  }
  // A write into a partially written block.
  if (AllSet(bs.disk.data(), p->first, p->count)) {
    lock.unlock();
    IssueData(p, entry, p->first, p->count);
    return;
  }
  r->done.Add();  // the bitmap write is a second unit
  if (bs.clear_zero) {
    // Clear sectors hold zeros (BitmapState): data and bits may go down together.
    SetBits(bs.mem.data(), p->first, p->count);
    std::vector<uint8_t> snapshot;
    const bool start = WaitForBitmap(bs, p, &snapshot);
    lock.unlock();
    IssueData(p, entry, p->first, p->count);
    if (start) IssueBitmapWrite(p->block, entry, snapshot, /*after_flush=*/false);
    return;
  }
  // Its bits follow its data (BitmapState).
  ++bs.data_pending;
  lock.unlock();
  IssueData(p, entry, p->first, p->count, Kind::kPartialData);
}

void DynamicQueue::OnPartialData(Piece* p, std::error_code ec) {
  // Once its bits are queued, another queue's bitmap write may finish the request: keep what
  // is needed after that.
  Request* const r = p->req;
  const uint32_t block = p->block;
  std::vector<uint8_t> snapshot;
  bool queued = false, start = false, flush = true;
  {
    std::lock_guard lock(st_.mu);
    auto it = st_.bitmaps.find(p->block);
    // Missing: the block became full (other writes' bits cover these sectors, on disk).
    if (it != st_.bitmaps.end()) {
      BitmapState& bs = *it->second;
      --bs.data_pending;
      if (!ec && !AllSet(bs.disk.data(), p->first, p->count)) {
        SetBits(bs.mem.data(), p->first, p->count);
        start = WaitForBitmap(bs, p, &snapshot);
        flush = !bs.clear_zero;
        queued = true;
      }
    }
  }
  if (start) IssueBitmapWrite(block, st_.bat.entry(block), snapshot, flush);
  Finish(r, ec);               // the data unit
  if (!queued) Finish(r, ec);  // no bitmap write to wait for
}

void DynamicQueue::ZeroPiece(Piece* p) {
  if (p->req->done.parent()->op == Op::kRead && ReadBelow(p, p->first, p->count)) return;
  Finish(p->req, {});
}

bool DynamicQueue::ReadBelow(Piece* p, uint32_t first, uint32_t count) {
  const IoRequest& parent = *p->req->done.parent();
  const uint64_t offset = uint64_t{p->block} * st_.block_size + uint64_t{first} * kSectorSize;
  const uint64_t length = uint64_t{count} * kSectorSize;
  const uint64_t buf_offset = p->buf_offset + uint64_t{first - p->first} * kSectorSize;
  const uint64_t parent_size = parent_ != nullptr ? st_.parent->size_bytes() : 0;
  const uint64_t in_parent = offset < parent_size ? std::min(length, parent_size - offset) : 0;
  if (in_parent < length) {
    ZeroIov(parent.iov, parent.iovcnt, buf_offset + in_parent, length - in_parent);
  }
  if (in_parent == 0) {
    Count(kCounterZeroReads);
    return false;
  }
  LowerOp* op = NewOp(Kind::kPiece);
  op->request = p->req;
  op->req.op = Op::kRead;
  op->req.offset = offset;
  op->req.length = in_parent;
  IovSlice(parent.iov, parent.iovcnt, buf_offset, in_parent, &op->iov);
  op->req.iov = op->iov.data();
  op->req.iovcnt = static_cast<uint32_t>(op->iov.size());
  Count(kCounterParentReads);
  IssueToParent(op);
  return true;
}

void DynamicQueue::ReadRuns(Piece* p) {
  const uint32_t entry = st_.bat.entry(p->block);
  // Every run may become one I/O: hold one unit per run beyond the piece's own, and give back
  // those of runs answered without I/O.
  const auto runs = static_cast<uint32_t>(runs_.size());
  if (runs > 1) p->req->done.Add(runs - 1);
  for (const Run& run : runs_) {
    if (run.set) {
      IssueData(p, entry, run.first, run.count);
    } else if (!ReadBelow(p, run.first, run.count)) {
      Finish(p->req, {});
    }
  }
}

void DynamicQueue::IssueData(Piece* p, uint32_t entry, uint32_t first, uint32_t count, Kind kind) {
  const IoRequest& parent = *p->req->done.parent();
  if (parent.op == Op::kRead) Count(kCounterDataReads);
  LowerOp* op = NewOp(kind);
  op->request = p->req;
  op->piece = p;
  op->req.op = parent.op;
  op->req.flags = parent.flags & (kIoMayUnmap | kIoFastZero);
  op->req.offset = uint64_t{entry} * kSectorSize + st_.bitmap_bytes + uint64_t{first} * kSectorSize;
  op->req.length = uint64_t{count} * kSectorSize;
  const uint64_t buf_offset = p->buf_offset + uint64_t{first - p->first} * kSectorSize;
  if (parent.op == Op::kWriteZeroes) {
    // no buffers
  } else if (buf_offset == 0 && op->req.length == parent.length) {
    op->req.iov = parent.iov;  // the whole of the caller's buffers
    op->req.iovcnt = parent.iovcnt;
  } else {
    IovSlice(parent.iov, parent.iovcnt, buf_offset, op->req.length, &op->iov);
    op->req.iov = op->iov.data();
    op->req.iovcnt = static_cast<uint32_t>(op->iov.size());
  }
  Issue(op);
}

void DynamicQueue::Redo(Piece* p, Action action) {
  if (p->req->owner != this) {
    Count(kCounterWaits);
    p->req->owner->Hand({p, action});
    return;
  }
  if (action == Action::kTranslate) {
    Translate(p);
  } else {
    ResumeBitmapWait(p);
  }
}

void DynamicQueue::Hand(Handoff h) {
  std::lock_guard lock(inbox_mu_);
  inbox_.push_back(h);
  inbox_flag_.store(true, std::memory_order_release);
}

void DynamicQueue::Kick() {
  std::lock_guard lock(inbox_mu_);
  kick_ = true;
  inbox_flag_.store(true, std::memory_order_release);
}

void DynamicQueue::Give(Request* r) {
  std::lock_guard lock(inbox_mu_);
  returned_.push_back(r);
  inbox_flag_.store(true, std::memory_order_release);
}

bool DynamicQueue::DrainInbox() {
  if (!inbox_flag_.load(std::memory_order_acquire)) return false;
  std::vector<Handoff> items;
  std::vector<Request*> returned;
  bool kick;
  {
    std::lock_guard lock(inbox_mu_);
    items.swap(inbox_);
    returned.swap(returned_);
    kick = kick_;
    kick_ = false;
    inbox_flag_.store(false, std::memory_order_relaxed);
  }
  for (Request* r : returned) requests_.Put(r);
  for (const Handoff& h : items) {
    if (h.action == Action::kTranslate) {
      Translate(h.piece);
    } else {
      ResumeBitmapWait(h.piece);
    }
  }
  if (kick) RunCommit();
  return !items.empty() || kick;
}

void DynamicQueue::SetPayload(LowerOp* op, Op rw, uint64_t offset, const void* src, size_t len) {
  if (op->buf.size() < len) op->buf = AlignedBuffer(len, 4096);
  if (src != nullptr) std::memcpy(op->buf.data(), src, len);
  op->req.op = rw;
  op->req.offset = offset;
  op->req.length = len;
  op->iov.assign(1, iovec{op->buf.data(), len});
  op->req.iov = op->iov.data();
  op->req.iovcnt = 1;
}

void DynamicQueue::FlushOutgoing() {
  internal::PhaseScope submit(device(), CpuPhase::kSubmit);
  while (!outgoing_.empty() || !parent_outgoing_.empty()) {
    SubmitPending(outgoing_, lower());
    if (!parent_outgoing_.empty()) SubmitPending(parent_outgoing_, *parent_);  // only with a parent
  }
}

void DynamicQueue::SubmitPending(std::vector<IoRequest*>& pending, IoQueue& queue) {
  if (pending.empty()) return;
  std::vector<IoRequest*> batch;
  batch.swap(pending);  // callbacks run by Submit may issue more into `pending`
  queue.Submit(batch);
  batch.clear();
  if (pending.empty()) pending.swap(batch);
}

void DynamicQueue::OnLowerDone(IoRequest& req) {
  LowerOp* op = static_cast<LowerOp*>(req.user_data);
  DynamicQueue* q = op->queue;
  if (op->kind == Kind::kDirect) {  // the common case first: nothing else to do
    q->Complete(*op->parent, req.status);
    q->ops_.Put(op);
    q->AfterWork();
    return;
  }
  const std::error_code ec = req.status;
  switch (op->kind) {
    case Kind::kPiece:
      q->Finish(op->request, ec);
      break;
    case Kind::kPartialData:
      q->OnPartialData(op->piece, ec);
      break;
    case Kind::kBitmapFlush:
      if (ec) {  // the bitmap is not written: its pieces fail
        q->OnBitmapWrite(op->next, ec);
        q->ops_.Put(op->next);
      } else {
        q->Issue(op->next);
      }
      break;
    case Kind::kDirect:  // above
      break;
    case Kind::kBitmapRead:
      q->OnBitmapRead(op, ec);
      break;
    case Kind::kBitmapWrite:
      q->OnBitmapWrite(op, ec);
      break;
    case Kind::kCommit:
      q->OnCommitOp(ec);
      break;
  }
  q->ops_.Put(op);
  q->AfterWork();
}

}  // namespace vstack::vhd
