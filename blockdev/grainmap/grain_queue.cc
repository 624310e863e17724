#include "blockdev/grainmap/grain_queue.h"

#include <bit>
#include <cstring>

#include "lib/iovec.h"

namespace vstack {

struct GrainQueue::Slot {
  uint64_t v = 0;
  uint32_t in_off = 0, len = 0;  // the caller's part of the grain
  uint64_t rel = 0;              // where that part is in the caller's iovecs
  uint64_t entry = 0;            // reads: the entry looked up (its unit pinned)
  Encoded enc;
  AlignedBuffer* buf = nullptr;      // the grain's content: merged, or gathered
  AlignedBuffer* scratch = nullptr;  // encoded bytes
  AlignedBuffer* stored = nullptr;   // kConfirm: the candidate's bytes
  Op* op = nullptr;
};

struct GrainQueue::Op {
  IoRequest* parent = nullptr;
  Stage stage = Stage::kRead;
  uint64_t first = 0, count = 0;
  std::vector<Slot> slots;
  uint32_t pending = 0;
  std::error_code error;
  bool write = false, zeroes = false, unmap = false;
  bool locked = false, room_tried = false, verify_failed = false;
  uint64_t gen = 0;  // the read generation it entered (UnitMap::Enter)
};

struct GrainQueue::Lower {
  GrainQueue* q = nullptr;
  Op* op = nullptr;  // null: the layer's own I/O, reported to done(ctx)
  IoRequest req;
  std::vector<iovec> iov;
  AlignedBuffer* bounce = nullptr;
  uint32_t first_slot = 0, slots = 0;  // reads: the slots whose bytes it holds
  bool rmw = false;                    // a read-modify-write's read (into the slot's buffer)
  GrainIo::Done done = nullptr;
  void* ctx = nullptr;
};

namespace {

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Calls fn(v, in_off, len, rel) for each grain that bytes [offset, offset+length) touch.
template <typename Fn>
void ForEachGrain(uint64_t offset, uint64_t length, uint32_t grain, Fn fn) {
  for (uint64_t pos = offset, end = offset + length; pos < end;) {
    const uint32_t in_off = static_cast<uint32_t>(pos % grain);
    const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(grain - in_off, end - pos));
    fn(pos / grain, in_off, len, pos - offset);
    pos += len;
  }
}

}  // namespace

GrainQueue::GrainQueue(GrainDevice& dev, std::unique_ptr<IoQueue> lower)
    : LayerQueue(dev, std::move(lower)),
      dev_(dev),
      map_(dev.map()),
      journal_(dev.map().Attach()),
      grain_(dev.grain()),
      block_(this->lower().device().geometry().logical_block),
      lower_align_(this->lower().device().geometry().mem_alignment),
      align_(std::max<uint64_t>(4096, lower_align_)),
      buffers_(64) {
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
  if (commit_due_) {
    commit_due_ = false;
    Quiesce();
    (void)dev_.Commit(GrainDevice::CommitKind::kDue);
  }
  for (IoRequest* p : batch) {
    if (p->op == ::vstack::Op::kFlush) {
      Quiesce();
      Status s = dev_.Commit(GrainDevice::CommitKind::kFlush);
      Complete(*p, s ? std::error_code() : s.error().code);
      continue;
    }
    const bool partial = p->offset % grain_ || p->length % grain_;
    if (p->op == ::vstack::Op::kWriteZeroes && (p->flags & kIoFastZero) && partial) {
      Complete(*p, Errc::kNotSupported);  // a partial grain is a read-modify-write: not fast
      continue;
    }
    Op* op = NewOp(p);
    if (!op->write) {
      Read(op);
      continue;
    }
    if (Status s = dev_.BeforeWrite(*this, op->first, op->count); !s) {
      Complete(*p, s.error().code);
      Recycle(op);
      continue;
    }
    Lock(op);
  }
  Send();
}

void GrainQueue::DoPoll(bool wait) {
  if (need_commit_) {
    need_commit_ = false;
    Quiesce();
    (void)dev_.Commit(commit_kind_);  // failures show as the retried writes' errors
  }
  if (!parked_.empty()) {
    std::vector<Op*> retry;
    retry.swap(parked_);
    for (Op* op : retry) {
      Count(GrainDevice::kRetries);
      Resume(op);
    }
    Send();
  }
  LayerQueue::DoPoll(wait);
}

GrainQueue::Op* GrainQueue::NewOp(IoRequest* p) {
  Op* op = ops_.Get();
  op->parent = p;
  op->write = p->op != ::vstack::Op::kRead;
  op->zeroes = op->write && p->op != ::vstack::Op::kWrite;
  op->unmap = p->op == ::vstack::Op::kDiscard ||
              (p->op == ::vstack::Op::kWriteZeroes && (p->flags & kIoMayUnmap));
  op->first = p->offset / grain_;
  op->count = (p->offset + p->length - 1) / grain_ - op->first + 1;
  op->pending = 0;
  op->error.clear();
  op->locked = op->room_tried = op->verify_failed = false;
  op->slots.clear();
  ForEachGrain(p->offset, p->length, grain_, [&](uint64_t v, uint32_t in_off, uint32_t len,
                                                 uint64_t rel) {
    Slot& s = op->slots.emplace_back();
    s.v = v;
    s.in_off = in_off;
    s.len = len;
    s.rel = rel;
    s.op = op;
  });
  return op;
}

void GrainQueue::Recycle(Op* op) {
  for (Slot& s : op->slots) {
    GiveBuffer(s.buf);
    GiveBuffer(s.scratch);
    GiveBuffer(s.stored);
  }
  ops_.Put(op);
}

void GrainQueue::Park(Op* op, Stage stage) {
  op->stage = stage;
  parked_.push_back(op);
}

void GrainQueue::Resume(Op* op) {
  switch (op->stage) {
    case Stage::kRead:  // a read to start over holding its grains' locks
      if (!map_.TryLock(op->first, op->count)) return Park(op, Stage::kRead);
      op->locked = true;
      return Read(op);
    case Stage::kLock:
      return Lock(op);
    default:
      return EncodeAll(op);
  }
}

void GrainQueue::Piece(Op* op, std::error_code status) {
  if (status && !op->error) op->error = status;
  if (--op->pending == 0) Next(op);
}

void GrainQueue::Next(Op* op) {
  switch (op->stage) {
    case Stage::kRead:
      return ReadDone(op);
    case Stage::kRmw:
      if (op->error) return Finish(op, op->error);
      for (Slot& s : op->slots) {
        if (s.len == grain_) continue;
        std::byte* at = s.buf->data() + s.in_off;
        if (op->zeroes) {
          std::memset(at, 0, s.len);
        } else {
          CopyFromIov(op->parent->iov, op->parent->iovcnt, s.rel, at, s.len);
        }
      }
      return EncodeAll(op);
    case Stage::kEncode:
      for (Slot& s : op->slots) {
        if (s.enc.kind != Encoded::kConfirm) continue;
        GrainWrite w{s.v, reinterpret_cast<uint64_t>(op), s.scratch->data(), &map_, journal_};
        s.enc = dev_.Confirm(state_.get(), w, GrainBytes(op, s),
                             op->error ? nullptr : s.stored->data(), s.enc);
      }
      op->error.clear();  // a candidate that could not be read is not the same grain
      if (!dev_.in_place()) map_.Leave(*journal_, op->gen);
      for (size_t i = 0; i < op->slots.size(); ++i) {
        if (op->slots[i].enc.kind == Encoded::kNoSpace) {
          Undo(op, op->slots.size());
          op->error = Errc::kNoSpace;
          return WriteDone(op);
        }
      }
      return StoreAll(op);
    default:
      return WriteDone(op);
  }
}

// ---------------------------------------------------------------------------------------------
// Reads

void GrainQueue::Read(Op* op) {
  const IoRequest& p = *op->parent;
  op->stage = Stage::kRead;
  op->pending = 1;
  op->verify_failed = false;
  if (!dev_.in_place()) op->gen = map_.Enter(*journal_);  // units stay until it leaves
  Lower* run = nullptr;
  uint64_t run_end = 0;
  bool run_direct = false;
  auto close_run = [&] {
    if (run == nullptr) return;
    if (!run_direct) Bounce(run, run_end - run->req.offset);
    out_.push_back(&run->req);
    ++op->pending;
    run = nullptr;
  };
  for (uint32_t i = 0; i < op->slots.size(); ++i) {
    Slot& s = op->slots[i];
    s.entry = map_.Get(s.v);
    if (!dev_.in_place() && !UnitMap::HasUnit(s.entry)) {
      ZeroIov(p.iov, p.iovcnt, s.rel, s.len);
      close_run();
      continue;
    }
    const Location loc = dev_.in_place() ? Location{s.v, 0, 0} : dev_.Locate(s.entry);
    const uint64_t at = dev_.data_offset() + loc.unit * grain_ + loc.offset;
    const uint64_t lo = at / block_ * block_;
    const uint64_t hi = RoundUp(at + (loc.raw() ? grain_ : loc.length), block_);
    const bool direct = loc.raw() && s.len == grain_ &&
                        SliceAligned(p.iov, p.iovcnt, s.rel, grain_, lower_align_);
    const bool joins = run && direct == run_direct &&
                       (direct ? lo == run_end : lo >= run->req.offset && lo <= run_end);
    if (!joins) {
      close_run();
      run = NewLower(op, ::vstack::Op::kRead, lo);
      run->first_slot = i;
      run->slots = 0;
      run_direct = direct;
      run_end = lo;
    }
    ++run->slots;
    run_end = std::max(run_end, hi);
    if (direct) {
      IovSlice(p.iov, p.iovcnt, s.rel, grain_, &run->iov);
      run->req.length += grain_;
    }
  }
  close_run();
  Piece(op, {});
}

// A read below is done: its slots' bytes go to the caller (or, read-modify-write, to the slot's
// buffer), decoded where stored encoded, and verified.
void GrainQueue::Deliver(Lower* l) {
  Op* op = l->op;
  const IoRequest& p = *op->parent;
  std::error_code status = l->req.status;
  for (uint32_t k = 0; k < l->slots; ++k) {
    Slot& s = op->slots[l->first_slot + k];
    if (!status) {
      bool ok = true;
      if (l->bounce) {
        const Location loc = dev_.in_place() ? Location{s.v, 0, 0} : dev_.Locate(s.entry);
        const std::byte* at =
            l->bounce->data() + (dev_.data_offset() + loc.unit * grain_ + loc.offset -
                                 l->req.offset);
        AlignedBuffer* tmp = nullptr;
        std::byte* dst = l->rmw ? s.buf->data()
                         : s.len == grain_
                             ? reinterpret_cast<std::byte*>(
                                   ContiguousSlice(p.iov, p.iovcnt, s.rel, grain_))
                             : nullptr;
        if (dst == nullptr) dst = (tmp = TakeBuffer(grain_))->data();
        if (loc.raw()) {
          std::memcpy(dst, at, grain_);
        } else {
          ok = dev_.Decode(state_.get(), at, loc.length, dst);
          if (!ok) status = Errc::kCorruption;
        }
        const iovec whole{dst, grain_};
        if (ok && dev_.verifies_reads() &&
            !dev_.VerifyRead(s.v, s.entry, &whole, 1, 0, op->locked || l->rmw)) {
          ok = false;
        }
        if (tmp) {
          if (ok) CopyToIov(p.iov, p.iovcnt, s.rel, tmp->data() + s.in_off, s.len);
          GiveBuffer(tmp);
        }
      } else if (dev_.verifies_reads()) {
        ok = dev_.VerifyRead(s.v, s.entry, p.iov, p.iovcnt, s.rel, op->locked);
      }
      if (!ok && !status) {
        if (l->rmw) {
          status = Errc::kChecksumMismatch;  // merging would give the damage a valid checksum
        } else {
          op->verify_failed = true;
        }
      }
    }
  }
  l->req.status = status;
}

void GrainQueue::ReadDone(Op* op) {
  if (!dev_.in_place()) map_.Leave(*journal_, op->gen);
  if (op->verify_failed && !op->locked && !op->error) {
    // A write may have overlapped the read: read again with the writers held off.
    Count(GrainDevice::kRetries);
    op->stage = Stage::kRead;
    return Resume(op);
  }
  std::error_code status = op->error;
  if (!status && op->verify_failed) status = Errc::kChecksumMismatch;
  if (status) ZeroIov(op->parent->iov, op->parent->iovcnt, 0, op->parent->length);
  Finish(op, status);
}

// ---------------------------------------------------------------------------------------------
// Writes

void GrainQueue::Lock(Op* op) {
  if (!map_.TryLock(op->first, op->count)) return Park(op, Stage::kLock);
  op->locked = true;
  ReadForMerge(op);
}

void GrainQueue::ReadForMerge(Op* op) {
  op->stage = Stage::kRmw;
  op->pending = 1;
  for (uint32_t i = 0; i < op->slots.size(); ++i) {
    Slot& s = op->slots[i];
    if (s.len == grain_) continue;
    s.buf = TakeBuffer(grain_);
    s.entry = map_.Get(s.v);  // stable: the grain is locked, so its unit stays referenced
    if (!dev_.in_place() && !UnitMap::HasUnit(s.entry)) {
      std::memset(s.buf->data(), 0, grain_);
      continue;
    }
    Count(GrainDevice::kRmwReads);
    const Location loc = dev_.in_place() ? Location{s.v, 0, 0} : dev_.Locate(s.entry);
    const uint64_t at = dev_.data_offset() + loc.unit * grain_ + loc.offset;
    Lower* l = NewLower(op, ::vstack::Op::kRead, at / block_ * block_);
    l->rmw = true;
    l->first_slot = i;
    l->slots = 1;
    Bounce(l, RoundUp(at + (loc.raw() ? grain_ : loc.length), block_) - l->req.offset);
    out_.push_back(&l->req);
    ++op->pending;
  }
  Piece(op, {});
}

const std::byte* GrainQueue::GrainBytes(Op* op, Slot& s) {
  if (s.buf) return s.buf->data();
  const IoRequest& p = *op->parent;
  char* c = ContiguousSlice(p.iov, p.iovcnt, s.rel, grain_);
  if (c && (reinterpret_cast<uintptr_t>(c) & (lower_align_ - 1)) == 0) {
    return reinterpret_cast<const std::byte*>(c);
  }
  s.buf = TakeBuffer(grain_);  // gathered, or aligned for the device below
  CopyFromIov(p.iov, p.iovcnt, s.rel, s.buf->data(), grain_);
  return s.buf->data();
}

void GrainQueue::EncodeAll(Op* op) {
  op->stage = Stage::kEncode;
  op->pending = 1;
  op->error.clear();
  if (!dev_.in_place()) {
    map_.Reserve(*journal_, op->count);
    op->gen = map_.Enter(*journal_);  // units Encode finds (dedup) stay until Confirm
  }
  for (size_t i = 0; i < op->slots.size(); ++i) {
    Slot& s = op->slots[i];
    if (op->zeroes && s.len == grain_) {
      // Mapped: kZero or kUnmapped. In place: zeroed below, and entry 0 (the layer's).
      s.enc = Encoded{Encoded::kZero, op->unmap || dev_.in_place() ? 0 : UnitMap::kZero};
      continue;
    }
    if (s.scratch == nullptr) s.scratch = TakeBuffer(grain_);
    const GrainWrite w{s.v, reinterpret_cast<uint64_t>(op), s.scratch->data(), &map_, journal_};
    s.enc = dev_.Encode(state_.get(), w, GrainBytes(op, s));
    if (s.enc.kind == Encoded::kBusy || s.enc.kind == Encoded::kNoSpace) {
      const bool busy = s.enc.kind == Encoded::kBusy;
      Undo(op, i);
      if (!dev_.in_place()) map_.Leave(*journal_, op->gen);
      if (busy) return Park(op, Stage::kEncode);
      op->error = Errc::kNoSpace;
      op->pending = 0;
      op->stage = Stage::kStore;
      return WriteDone(op);
    }
  }
  for (Slot& s : op->slots) {  // verify=on: read the candidates, then Confirm (Next)
    if (s.enc.kind != Encoded::kConfirm) continue;
    if (s.stored == nullptr) s.stored = TakeBuffer(grain_);
    Lower* l = NewLower(op, ::vstack::Op::kRead, dev_.data_offset() + s.enc.unit * grain_);
    AddBytes(l, s.stored->data(), grain_);
    out_.push_back(&l->req);
    ++op->pending;
  }
  Piece(op, {});
}

void GrainQueue::StoreAll(Op* op) {
  op->stage = Stage::kStore;
  op->pending = 1;
  const IoRequest& p = *op->parent;
  Lower* w = nullptr;
  uint64_t next = 0;
  std::vector<void*>& handles = pack_grains_;
  std::vector<const std::byte*>& bytes = pack_bytes_;
  std::vector<Encoded>& packs = pack_encoded_;
  handles.clear();
  bytes.clear();
  packs.clear();
  for (Slot& s : op->slots) {
    const bool zero_run = s.enc.kind == Encoded::kZero && dev_.in_place();
    if (s.enc.kind == Encoded::kPack) {
      handles.push_back(&s);
      bytes.push_back(s.scratch->data());
      packs.push_back(s.enc);
      continue;
    }
    if (s.enc.kind != Encoded::kStore && !zero_run) continue;
    const uint64_t unit = dev_.in_place() ? s.v : s.enc.unit;
    const ::vstack::Op kind = zero_run ? ::vstack::Op::kWriteZeroes : ::vstack::Op::kWrite;
    if (!w || unit != next || w->req.op != kind) {
      if (w) out_.push_back(&w->req), ++op->pending;
      w = NewLower(op, kind, dev_.data_offset() + unit * grain_);
      if (dev_.in_place()) {
        w->req.flags = zero_run ? p.flags & (kIoFua | kIoFastZero | kIoMayUnmap) |
                                      (op->unmap ? kIoMayUnmap : 0)
                                : p.flags & kIoFua;
      }
    }
    if (zero_run) {
      w->req.length += grain_;
    } else {
      AddBytes(w, const_cast<std::byte*>(GrainBytes(op, s)), grain_);
    }
    next = unit + 1;
  }
  if (w) out_.push_back(&w->req), ++op->pending;
  if (!handles.empty()) {
    op->pending += static_cast<uint32_t>(handles.size());
    dev_.Pack(state_.get(), *this, handles, bytes, packs);
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
    const bool below = op->error == std::errc::no_space_on_device;
    if ((below || op->error == Errc::kNoSpace) && !op->room_tried && !dev_.in_place()) {
      // Space may come back: what was released comes free with a commit, and (below) the
      // commit discards every free unit. Then once more.
      op->room_tried = true;
      need_commit_ = true;
      commit_kind_ = below ? GrainDevice::CommitKind::kMakeRoom : GrainDevice::CommitKind::kDue;
      return Park(op, Stage::kEncode);
    }
    return Finish(op, op->error);
  }
  uint64_t zeros = 0;
  {
    std::lock_guard lock(journal_->mu);
    for (Slot& s : op->slots) {
      uint64_t e = s.enc.entry;
      if (s.enc.kind == Encoded::kStore && !dev_.in_place()) e = UnitMap::EntryOf(s.enc.unit);
      zeros += s.enc.kind == Encoded::kZero;
      map_.Remap(*journal_, s.v, e, s.enc.kind == Encoded::kShare);
      if (s.enc.kind == Encoded::kStore && !dev_.in_place()) {
        if (dev_.format().unit_records) map_.Stored(*journal_, s.enc.unit);
        dev_.Stored(s.enc.unit);
      }
    }
    if (!dev_.in_place() && dev_.commit_due(journal_->grains.size() + journal_->stored.size())) {
      commit_due_ = true;
    }
  }
  if (zeros) Count(GrainDevice::kZeroGrains, zeros);
  Finish(op, {});
}

void GrainQueue::Undo(Op* op, size_t slots) {
  std::lock_guard lock(journal_->mu);
  for (size_t i = 0; i < slots; ++i) {
    Slot& s = op->slots[i];
    const GrainWrite w{s.v, reinterpret_cast<uint64_t>(op), nullptr, &map_, journal_};
    switch (s.enc.kind) {
      case Encoded::kShare:
        map_.DropRef(*journal_, UnitMap::UnitOf(s.enc.entry));
        break;
      case Encoded::kStore:
        if (dev_.in_place()) break;
        dev_.Unencode(w, s.enc);
        map_.GiveBack(s.enc.unit);
        break;
      case Encoded::kConfirm:
        dev_.Unencode(w, s.enc);
        break;
      default:
        break;
    }
    s.enc = Encoded{};
  }
}

void GrainQueue::Finish(Op* op, std::error_code status) {
  if (op->locked) map_.Unlock(op->first, op->count);
  if (op->write) dev_.AfterWrite(op->first, op->count);
  IoRequest* parent = op->parent;
  Recycle(op);
  Complete(*parent, status);
}

// ---------------------------------------------------------------------------------------------
// Requests below

GrainQueue::Lower* GrainQueue::NewLower(Op* op, ::vstack::Op kind, uint64_t offset) {
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
  l->rmw = false;
  return l;
}

void GrainQueue::AddBytes(Lower* l, std::byte* buf, uint64_t length) {
  l->iov.push_back(iovec{buf, length});
  l->req.length += length;
}

void GrainQueue::Bounce(Lower* l, uint64_t length) {
  l->bounce = TakeBuffer(length);
  l->iov.assign(1, iovec{l->bounce->data(), length});
  l->req.length = length;
}

void GrainQueue::Issue(::vstack::Op op, uint64_t offset, std::byte* buf, uint32_t length,
                       Done done, void* ctx) {
  Lower* l = NewLower(nullptr, op, dev_.data_offset() + offset);
  l->done = done;
  l->ctx = ctx;
  AddBytes(l, buf, length);
  out_.push_back(&l->req);
}

void GrainQueue::Send() {
  if (in_send_) return;  // the loop below sends what is added meanwhile
  in_send_ = true;
  while (!out_.empty()) {
    for (IoRequest* r : out_) {
      Lower* l = static_cast<Lower*>(r->user_data);
      size_t n = 0;  // adjacent pieces merged: a run of the caller's buffer is one iovec
      for (const iovec& v : l->iov) {
        if (n && static_cast<char*>(l->iov[n - 1].iov_base) + l->iov[n - 1].iov_len == v.iov_base) {
          l->iov[n - 1].iov_len += v.iov_len;
        } else {
          l->iov[n++] = v;
        }
      }
      l->iov.resize(n);
      r->iov = l->iov.data();
      r->iovcnt = static_cast<uint32_t>(l->iov.size());
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
  Op* op = l->op;
  if (op == nullptr) {
    const GrainIo::Done done = l->done;
    void* ctx = l->ctx;
    q->lowers_.Put(l);
    done(ctx, r.status);
  } else {
    if (op->stage == Stage::kRead || l->rmw) q->Deliver(l);
    const std::error_code status = l->req.status;
    q->GiveBuffer(l->bounce);
    q->lowers_.Put(l);
    q->Piece(op, status);
  }
  q->Send();
}

AlignedBuffer* GrainQueue::TakeBuffer(uint64_t size) {
  const unsigned cls = std::bit_width(std::max<uint64_t>(size, 4096) - 1);
  if (buffers_[cls].empty()) {
    all_buffers_.push_back(std::make_unique<AlignedBuffer>(uint64_t{1} << cls, align_));
    return all_buffers_.back().get();
  }
  AlignedBuffer* b = buffers_[cls].back();
  buffers_[cls].pop_back();
  return b;
}

void GrainQueue::GiveBuffer(AlignedBuffer*& b) {
  if (b == nullptr) return;
  buffers_[std::bit_width(b->size() - 1)].push_back(b);
  b = nullptr;
}

}  // namespace vstack
