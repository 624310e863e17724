#include "blockdev/grainmap/grain_queue.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "lib/iovec.h"

namespace vstack {

using IoOp = ::vstack::Op;

struct GrainQueue::Slot {
  uint64_t v = 0;
  uint32_t in_off = 0, len = 0;  // the caller's part of the grain
  uint64_t rel = 0;              // where that part is in the caller's iovecs
  uint64_t entry = 0;            // the entry read
  Encoded enc;
  AlignedBuffer* buf = nullptr;      // the grain's content: merged, or gathered
  AlignedBuffer* scratch = nullptr;  // encoded bytes; kConfirm: the candidate's bytes
  Op* op = nullptr;
};

struct GrainQueue::Op {
  IoRequest* parent = nullptr;
  Stage stage = Stage::kRead;
  uint64_t first = 0, count = 0;
  uint64_t gen = 0;  // the read generation it entered (UnitMap::Enter)
  std::vector<Slot> slots;
  uint32_t pending = 0;
  std::error_code error;
  bool write = false, zeroes = false, unmap = false;
  bool locked = false, room_tried = false, bad_read = false;
  bool no_unit = false;  // this layer had no free unit (not: the device below is full)
};

struct GrainQueue::Lower {
  GrainQueue* q = nullptr;
  Op* op = nullptr;  // null: the layer's own I/O, reported to done(ctx)
  IoRequest req;
  std::vector<iovec> iov;
  AlignedBuffer* bounce = nullptr;
  uint32_t first_slot = 0, slots = 0;  // reads: the slots it holds the bytes of
  GrainIo::Done done = nullptr;
  void* ctx = nullptr;
};

GrainQueue::GrainQueue(GrainDevice& dev, std::unique_ptr<IoQueue> lower)
    : LayerQueue(dev, std::move(lower)),
      dev_(dev),
      map_(dev.map()),
      journal_(dev.map().Attach()),
      grain_(dev.grain()),
      block_(this->lower().device().geometry().logical_block),
      lower_align_(this->lower().device().geometry().mem_alignment),
      in_place_(dev.in_place()),
      buffers_(std::max<uint64_t>(4096, lower_align_)) {
  state_ = dev.NewQueueState(*this);
}

GrainQueue::~GrainQueue() {
  state_.reset();  // a packer lets its bins go (Unhold)
  map_.Detach(journal_);
}

void GrainQueue::Unhold(uint64_t unit) {
  std::lock_guard lock(journal_->mu);
  map_.DropRef(*journal_, unit);
}

// ---------------------------------------------------------------------------------------------
// The loop

void GrainQueue::DoSubmit(std::span<IoRequest* const> batch) {
  if (std::exchange(commit_due_, false)) {
    Quiesce();
    (void)dev_.Commit(GrainDevice::CommitKind::kDue);
  }
  for (IoRequest* p : batch) {
    if (p->op == IoOp::kFlush) {
      Quiesce();
      const Status s = dev_.Commit(GrainDevice::CommitKind::kFlush);
      Complete(*p, s ? std::error_code() : s.error().code);
    } else if (p->op == IoOp::kWriteZeroes && (p->flags & kIoFastZero) &&
               (p->offset % grain_ || p->length % grain_)) {
      Complete(*p, Errc::kNotSupported);  // a partial grain is a read-modify-write: not fast
    } else if (Op* op = NewOp(p); !op->write) {
      Read(op, Stage::kRead);
    } else if (Status s = dev_.BeforeWrite(*this, op->first, op->count); !s) {
      Finish(op, s.error().code);
    } else {
      Resume(op);  // stage kLock
    }
  }
  Send();
}

void GrainQueue::DoPoll(bool wait) {
  if (std::exchange(need_commit_, false)) {
    Quiesce();
    (void)dev_.Commit(commit_kind_);  // failures show as the retried writes' errors
  }
  if (!parked_.empty()) {
    retry_.swap(parked_);
    for (Op* op : retry_) {
      Count(GrainDevice::kRetries);
      Resume(op);
    }
    retry_.clear();
    Send();
  }
  LayerQueue::DoPoll(wait);
}

GrainQueue::Op* GrainQueue::NewOp(IoRequest* p) {
  Op* op = ops_.Get();
  op->parent = p;
  op->stage = Stage::kLock;
  op->write = p->op != IoOp::kRead;
  op->zeroes = op->write && p->op != IoOp::kWrite;
  op->unmap = p->op == IoOp::kDiscard || (p->op == IoOp::kWriteZeroes && (p->flags & kIoMayUnmap));
  op->first = p->offset / grain_;
  op->count = (p->offset + p->length - 1) / grain_ - op->first + 1;
  op->error.clear();
  op->locked = op->room_tried = op->no_unit = false;
  op->slots.resize(op->count);
  for (uint64_t i = 0, pos = p->offset; i < op->count; ++i) {
    Slot& s = op->slots[i] = Slot{};
    s.v = op->first + i;
    s.in_off = static_cast<uint32_t>(pos % grain_);
    s.len = static_cast<uint32_t>(std::min<uint64_t>(grain_ - s.in_off, p->offset + p->length - pos));
    s.rel = pos - p->offset;
    s.op = op;
    pos += s.len;
  }
  return op;
}

void GrainQueue::Park(Op* op, Stage stage) {
  op->stage = stage;
  parked_.push_back(op);
}

void GrainQueue::Resume(Op* op) {
  if (op->stage == Stage::kEncode) return EncodeAll(op);
  // A write to start (kLock), or a read to start over holding its grains' locks (kRead).
  if (!map_.TryLock(op->first, op->count)) return Park(op, op->stage);
  op->locked = true;
  Read(op, op->write ? Stage::kRmw : Stage::kRead);
}

void GrainQueue::Piece(Op* op, std::error_code status) {
  if (status && !op->error) op->error = status;
  if (--op->pending == 0) Next(op);
}

void GrainQueue::Next(Op* op) {
  const IoRequest& p = *op->parent;
  switch (op->stage) {
    case Stage::kRead:
      return ReadDone(op);
    case Stage::kRmw:
      if (op->error) return Finish(op, op->error);
      for (Slot& s : op->slots) {  // merge the caller's part into the old grain
        if (s.len == grain_) continue;
        if (op->zeroes) {
          std::memset(s.buf->data() + s.in_off, 0, s.len);
        } else {
          CopyFromIov(p.iov, p.iovcnt, s.rel, s.buf->data() + s.in_off, s.len);
        }
      }
      return EncodeAll(op);
    case Stage::kEncode:
      for (Slot& s : op->slots) {  // a candidate that could not be read is another grain
        if (s.enc.kind != Encoded::kConfirm) continue;
        s.enc = dev_.Confirm(state_.get(),
                             GrainWrite{s.v, reinterpret_cast<uint64_t>(op), s.scratch->data(),
                                        &map_, journal_},
                             GrainBytes(op, s), op->error ? nullptr : s.scratch->data(), s.enc);
      }
      if (!in_place_) map_.Leave(*journal_, op->gen);
      op->error.clear();
      if (std::any_of(op->slots.begin(), op->slots.end(),
                      [](const Slot& s) { return s.enc.kind == Encoded::kNoSpace; })) {
        Undo(op, op->slots.size());
        op->error = Errc::kNoSpace;
        op->no_unit = true;
        return WriteDone(op);
      }
      return StoreAll(op);
    default:
      return WriteDone(op);
  }
}

Location GrainQueue::Where(const Slot& s, uint64_t* at) const {
  const Location l = in_place_ ? Location{s.v, 0, 0} : dev_.Locate(s.entry);
  *at = dev_.data_offset() + l.unit * grain_ + l.offset;
  return l;
}

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
    s.entry = map_.Get(s.v);  // (read-modify-write: the grain is locked, its unit stays)
    if (!in_place_ && !UnitMap::HasUnit(s.entry)) {
      if (rmw) std::memset(s.buf->data(), 0, grain_);
      if (!rmw) ZeroIov(p.iov, p.iovcnt, s.rel, s.len);
      close();
      continue;
    }
    if (rmw) Count(GrainDevice::kRmwReads);
    uint64_t at;
    const Location l = Where(s, &at);
    const uint64_t lo = at / block_ * block_;
    const uint64_t hi = (at + (l.raw() ? grain_ : l.length) + block_ - 1) / block_ * block_;
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

// ---------------------------------------------------------------------------------------------
// Writes

std::byte* GrainQueue::GrainBytes(Op* op, Slot& s) {
  if (s.buf) return s.buf->data();
  const IoRequest& p = *op->parent;
  char* c = ContiguousSlice(p.iov, p.iovcnt, s.rel, grain_);
  if (c && (reinterpret_cast<uintptr_t>(c) & (lower_align_ - 1)) == 0) {
    return reinterpret_cast<std::byte*>(c);
  }
  s.buf = buffers_.Get(grain_);  // gathered, or aligned for the device below
  CopyFromIov(p.iov, p.iovcnt, s.rel, s.buf->data(), grain_);
  return s.buf->data();
}

void GrainQueue::EncodeAll(Op* op) {
  op->stage = Stage::kEncode;
  op->pending = 1;
  op->error.clear();
  if (!in_place_) {
    map_.Reserve(*journal_, op->count);
    op->gen = map_.Enter(*journal_);  // what Encode finds (dedup) is not reused before Confirm
  }
  for (size_t i = 0; i < op->slots.size(); ++i) {
    Slot& s = op->slots[i];
    if (op->zeroes && s.len == grain_) {
      // Mapped: kZero or kUnmapped. In place: zeroed below, and entry 0 (the layer's).
      s.enc = Encoded{Encoded::kZero, op->unmap || in_place_ ? 0 : UnitMap::kZero};
      continue;
    }
    if (s.scratch == nullptr) s.scratch = buffers_.Get(grain_);
    s.enc = dev_.Encode(state_.get(),
                        GrainWrite{s.v, reinterpret_cast<uint64_t>(op), s.scratch->data(), &map_,
                                   journal_},
                        GrainBytes(op, s));
    if (s.enc.kind == Encoded::kBusy || s.enc.kind == Encoded::kNoSpace) {
      const bool busy = s.enc.kind == Encoded::kBusy;
      Undo(op, i);
      if (!in_place_) map_.Leave(*journal_, op->gen);
      if (busy) return Park(op, Stage::kEncode);
      op->error = Errc::kNoSpace;
      op->no_unit = true;
      return WriteDone(op);
    }
  }
  for (Slot& s : op->slots) {  // verify=on: read the candidates, then Confirm (Next)
    if (s.enc.kind != Encoded::kConfirm) continue;
    Lower* l = NewLower(op, IoOp::kRead, dev_.data_offset() + s.enc.unit * grain_);
    l->iov.assign(1, iovec{s.scratch->data(), grain_});
    l->req.length = grain_;
    out_.push_back(&l->req);
    ++op->pending;
  }
  Piece(op, {});
}

void GrainQueue::StoreAll(Op* op) {
  op->stage = Stage::kStore;
  op->pending = 1;
  const IoRequest& p = *op->parent;
  pack_grains_.clear();
  pack_bytes_.clear();
  pack_encoded_.clear();
  Lower* w = nullptr;
  uint64_t next = 0;
  auto send = [&] {
    if (w) out_.push_back(&w->req), ++op->pending;
  };
  for (Slot& s : op->slots) {
    if (s.enc.kind == Encoded::kPack) {
      pack_grains_.push_back(&s);
      pack_bytes_.push_back(s.scratch->data());
      pack_encoded_.push_back(s.enc);
    }
    const bool zeroes = s.enc.kind == Encoded::kZero && in_place_;
    if (s.enc.kind != Encoded::kStore && !zeroes) continue;
    const uint64_t unit = in_place_ ? s.v : s.enc.unit;
    const IoOp kind = zeroes ? IoOp::kWriteZeroes : IoOp::kWrite;
    if (!w || unit != next || w->req.op != kind) {  // consecutive units: one request below
      send();
      w = NewLower(op, kind, dev_.data_offset() + unit * grain_);
      if (in_place_) {  // the caller's flags go down with its grains
        w->req.flags = zeroes ? (p.flags & (kIoFua | kIoFastZero | kIoMayUnmap)) |
                                    (op->unmap ? kIoMayUnmap : 0)
                              : p.flags & kIoFua;
      }
    }
    if (!zeroes) w->iov.push_back(iovec{GrainBytes(op, s), grain_});
    w->req.length += grain_;
    next = unit + 1;
  }
  send();
  if (!pack_grains_.empty()) {
    op->pending += static_cast<uint32_t>(pack_grains_.size());
    dev_.Pack(state_.get(), *this, pack_grains_, pack_bytes_, pack_encoded_);
  }
  Piece(op, {});
}

void GrainQueue::Packed(void* grain, uint64_t entry, std::error_code status) {
  Slot* s = static_cast<Slot*>(grain);
  s->enc.entry = entry;
  Piece(s->op, status);
}

void GrainQueue::WriteDone(Op* op) {
  if (op->error) {
    Undo(op, op->slots.size());
    // (Errc::kNoSpace compares equal to ENOSPC: a layer below that ran out says it that way.)
    const bool below = !op->no_unit && op->error == std::errc::no_space_on_device;
    if ((below || op->no_unit) && !op->room_tried && !in_place_) {
      // Space may come back: a commit frees what was released and (below) discards every
      // free unit. Then once more.
      op->room_tried = need_commit_ = true;
      commit_kind_ = below ? GrainDevice::CommitKind::kMakeRoom : GrainDevice::CommitKind::kDue;
      return Park(op, Stage::kEncode);
    }
    return Finish(op, op->error);
  }
  uint64_t zeros = 0;
  {
    std::lock_guard lock(journal_->mu);
    for (Slot& s : op->slots) {
      const bool stored = s.enc.kind == Encoded::kStore && !in_place_;
      zeros += s.enc.kind == Encoded::kZero;
      map_.Remap(*journal_, s.v, stored ? UnitMap::EntryOf(s.enc.unit) : s.enc.entry,
                 s.enc.kind == Encoded::kShare);
      if (!stored) continue;
      if (dev_.format().unit_records) map_.Stored(*journal_, s.enc.unit);
      dev_.Stored(s.enc.unit);
    }
    commit_due_ = commit_due_ || (!in_place_ && dev_.commit_due(journal_->grains.size() +
                                                                journal_->stored.size()));
  }
  if (zeros) Count(GrainDevice::kZeroGrains, zeros);
  Finish(op, {});
}

void GrainQueue::Undo(Op* op, size_t slots) {
  std::lock_guard lock(journal_->mu);
  for (size_t i = 0; i < slots; ++i) {
    Encoded& e = op->slots[i].enc;
    if (e.kind == Encoded::kShare) map_.DropRef(*journal_, UnitMap::UnitOf(e.entry));
    if ((e.kind == Encoded::kStore && !in_place_) || e.kind == Encoded::kConfirm) {
      dev_.Unencode(GrainWrite{op->slots[i].v, reinterpret_cast<uint64_t>(op), nullptr, &map_,
                               journal_},
                    e);
      if (e.kind == Encoded::kStore) map_.GiveBack(e.unit);
    }
    e = Encoded{};
  }
}

void GrainQueue::Finish(Op* op, std::error_code status) {
  if (op->locked) map_.Unlock(op->first, op->count);
  if (op->write) dev_.AfterWrite(op->first, op->count);
  for (Slot& s : op->slots) {
    buffers_.Put(s.buf);
    buffers_.Put(s.scratch);
  }
  IoRequest* parent = op->parent;
  ops_.Put(op);
  Complete(*parent, status);
}

// ---------------------------------------------------------------------------------------------
// Requests below

GrainQueue::Lower* GrainQueue::NewLower(Op* op, IoOp kind, uint64_t offset) {
  Lower* l = lowers_.Get();
  l->q = this;
  l->op = op;
  l->req = IoRequest{};
  l->req.op = kind;
  l->req.offset = offset;
  l->req.on_complete = &GrainQueue::OnLower;
  l->req.user_data = l;
  l->iov.clear();
  l->bounce = nullptr;
  l->first_slot = l->slots = 0;
  return l;
}

void GrainQueue::Issue(IoOp op, uint64_t offset, std::byte* buf, uint32_t length, Done done,
                       void* ctx) {
  Lower* l = NewLower(nullptr, op, dev_.data_offset() + offset);
  l->done = done;
  l->ctx = ctx;
  l->iov.assign(1, iovec{buf, length});
  l->req.length = length;
  out_.push_back(&l->req);
}

void GrainQueue::Send() {
  if (in_send_) return;  // the loop below sends what is added meanwhile
  in_send_ = true;
  while (!out_.empty()) {
    for (IoRequest* r : out_) {
      std::vector<iovec>& iov = static_cast<Lower*>(r->user_data)->iov;
      size_t n = 0;  // adjacent pieces merged: a run of the caller's buffer is one iovec
      for (const iovec& v : iov) {
        if (n && static_cast<char*>(iov[n - 1].iov_base) + iov[n - 1].iov_len == v.iov_base) {
          iov[n - 1].iov_len += v.iov_len;
        } else {
          iov[n++] = v;
        }
      }
      iov.resize(n);
      r->iov = iov.data();
      r->iovcnt = static_cast<uint32_t>(n);
    }
    sending_.swap(out_);
    lower().Submit(sending_);
    sending_.clear();
  }
  in_send_ = false;
}

void GrainQueue::OnLower(IoRequest& r) {
  Lower* l = static_cast<Lower*>(r.user_data);
  GrainQueue* q = l->q;
  if (Op* op = l->op) {
    if (op->stage == Stage::kRead || op->stage == Stage::kRmw) q->Deliver(l);
    const std::error_code status = l->req.status;
    q->buffers_.Put(l->bounce);
    q->lowers_.Put(l);
    q->Piece(op, status);
  } else {
    const GrainIo::Done done = l->done;
    void* ctx = l->ctx;
    q->lowers_.Put(l);
    done(ctx, r.status);
  }
  q->Send();
}

}  // namespace vstack
