// GrainQueue's reads (grain_queue.h): a caller's read, and the reads of read-modify-write, in
// runs of grains that lie next to each other below; then decode, verify and deliver.
#include <algorithm>
#include <cstring>

#include "blockdev/grainmap/grain_queue.h"
#include "blockdev/grainmap/grain_queue_op.h"
#include "lib/cpu_tag.h"
#include "lib/iovec.h"

namespace vstack {

// ---------------------------------------------------------------------------------------------
// Reads

void GrainQueue::Read(Op* op, Stage stage) {
  const IoRequest& p = *op->parent;
  const bool rmw = stage == Stage::kRmw;
  op->stage = stage;
  op->pending = 1;
  op->bad_read = false;
  if (!rmw && !in_place_) op->gen = map_.Enter(*journal_);  // its units stay until it leaves
  Lower* run = nullptr;
  uint64_t end = 0;  // where the run's blocks end below
  bool direct = false;
  auto close = [&] {
    if (run == nullptr) return;
    run->req.length = end - run->req.offset;
    if (!direct) {
      run->bounce = buffers_.Get(run->req.length);
      run->iov.assign(1, iovec{run->bounce->data(), run->req.length});
    }
    out_.push_back(&run->req);
    ++op->pending;
    run = nullptr;
  };
  for (uint32_t i = 0; i < op->slots.size(); ++i) {
    Slot& s = op->slots[i];
    if (rmw && s.len == grain_) continue;
    if (rmw) s.buf = buffers_.Get(grain_);
    {
      internal::PhaseScope index(dev_, CpuPhase::kIndex);
      s.entry = map_.Get(s.v);  // (read-modify-write: the grain is locked, its unit stays)
    }
    if (!in_place_ && !UnitMap::HasUnit(s.entry)) {
      if (rmw) std::memset(s.buf->data(), 0, grain_);
      if (!rmw) ZeroIov(p.iov, p.iovcnt, s.rel, s.len);
      close();
      continue;
    }
    if (rmw) Count(GrainDevice::kRmwReads);
    uint64_t at;
    const Location l = Where(s, &at);
    const uint64_t lo = at & ~uint64_t{block_ - 1};  // (logical blocks are powers of two)
    const uint64_t hi = (at + (l.raw() ? grain_ : l.length) + block_ - 1) & ~uint64_t{block_ - 1};
    const bool d = !rmw && l.raw() && s.len == grain_ &&
                   SliceAligned(p.iov, p.iovcnt, s.rel, grain_, lower_align_);
    if (!run || rmw || d != direct || (d ? lo != end : lo < run->req.offset || lo > end)) {
      close();
      run = NewLower(op, IoOp::kRead, lo);
      run->first_slot = i;
      direct = d;
      end = lo;
    }
    ++run->slots;
    end = std::max(end, hi);
    if (d) IovSlice(p.iov, p.iovcnt, s.rel, grain_, &run->iov);
  }
  close();
  Piece(op, {});
}

// A read below is done: its slots' bytes go to the caller (or, read-modify-write, to the slot's
// buffer), decoded where stored encoded, and verified.
void GrainQueue::Deliver(Lower* l) {
  Op* op = l->op;
  const IoRequest& p = *op->parent;
  const bool rmw = op->stage == Stage::kRmw;
  const bool sure = rmw || op->locked;  // no writer can have raced it: a mismatch is real
  for (uint32_t k = 0; k < l->slots && !l->req.status; ++k) {
    Slot& s = op->slots[l->first_slot + k];
    if (l->bounce == nullptr) {  // it went straight into the caller's buffers
      if (dev_.verifies_reads() && !dev_.VerifyRead(s.v, s.entry, p.iov, p.iovcnt, s.rel, sure)) {
        op->bad_read = true;
      }
      continue;
    }
    uint64_t at;
    const Location loc = Where(s, &at);
    const std::byte* src = l->bounce->data() + (at - l->req.offset);
    std::byte* dst = rmw ? s.buf->data()
                     : s.len == grain_
                         ? reinterpret_cast<std::byte*>(ContiguousSlice(p.iov, p.iovcnt, s.rel, grain_))
                         : nullptr;
    AlignedBuffer* tmp = dst ? nullptr : buffers_.Get(grain_);
    if (tmp) dst = tmp->data();
    if (loc.raw()) {
      std::memcpy(dst, src, grain_);
    } else if (!dev_.Decode(state_.get(), src, loc.length, dst)) {
      l->req.status = Errc::kCorruption;
    }
    const iovec whole{dst, grain_};
    if (!l->req.status && dev_.verifies_reads() &&
        !dev_.VerifyRead(s.v, s.entry, &whole, 1, 0, sure)) {
      if (rmw) l->req.status = Errc::kChecksumMismatch;  // merging would bless the damage
      op->bad_read = !rmw;
    }
    if (tmp && !l->req.status) CopyToIov(p.iov, p.iovcnt, s.rel, tmp->data() + s.in_off, s.len);
    buffers_.Put(tmp);
  }
}

void GrainQueue::ReadDone(Op* op) {
  if (!in_place_) map_.Leave(*journal_, op->gen);
  if (op->bad_read && !op->locked && !op->error) {
    Count(GrainDevice::kRetries);  // a write may have overlapped it: again, writers held off
    return Resume(op);
  }
  std::error_code status = op->error;
  if (!status && op->bad_read) status = Errc::kChecksumMismatch;
  if (status) ZeroIov(op->parent->iov, op->parent->iovcnt, 0, op->parent->length);  // no bad data
  Finish(op, status);
}

}  // namespace vstack
