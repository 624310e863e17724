// GrainQueue: the loop, writes and requests below (reads: grain_read.cc).
#include "blockdev/grainmap/grain_queue.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include "blockdev/grainmap/grain_queue_op.h"
#include "lib/cpu_tag.h"
#include "lib/iovec.h"
#include "lib/progress.h"

namespace vstack {

GrainQueue::GrainQueue(GrainDevice& dev, std::unique_ptr<IoQueue> lower)
    : LayerQueue(dev, std::move(lower)),
      dev_(dev),
      map_(dev.map()),
      journal_(dev.map().Attach()),
      grain_(dev.grain()),
      grain_shift_(static_cast<uint32_t>(std::countr_zero(dev.grain()))),
      block_(this->lower().device().geometry().logical_block),
      lower_align_(this->lower().device().geometry().mem_alignment),
      in_place_(dev.in_place()),
      encodes_to_scratch_(dev.EncodesToScratch()),
      buffers_(std::max<uint64_t>(4096, lower_align_)) {
  state_ = dev.NewQueueState(*this);
}

GrainQueue::~GrainQueue() {
  state_.reset();  // a packer lets its bins go (Unhold)
  map_.Detach(journal_);
}

void GrainQueue::Hold(uint64_t unit) {
  std::lock_guard lock(journal_->mu);  // as every reference change (UnitMap: "Changes")
  map_.Hold(*journal_, unit);
}

void GrainQueue::Unhold(uint64_t unit) {
  std::lock_guard lock(journal_->mu);
  map_.Unhold(*journal_, unit);
}

// ---------------------------------------------------------------------------------------------
// The loop

void GrainQueue::DoSubmit(std::span<IoRequest* const> batch) {
  std::optional<UnitMap::OwnerActivity> active;
  if (!in_place_) active.emplace(*journal_);
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
  std::optional<UnitMap::OwnerActivity> active;
  if (!in_place_) active.emplace(*journal_);
  if (std::exchange(need_commit_, false)) {
    // A write that found no room after a commit may wait for another queue's reader to leave,
    // whose thread the scheduler can hold off for a while: back off (10 us, doubling, at most
    // 82 ms; about 0.25 s over all the tries) before the next commit, instead of committing
    // again and again within the other thread's time slice. Not under a simulator
    // (lib/progress.h): its threads run on this one, so a sleep lets none of them run; its
    // seeded schedules interleave them instead.
    if (room_wait_ > 0 && CurrentProgressWaiter() == nullptr) {
      std::this_thread::sleep_for(std::chrono::microseconds(10 << std::min(room_wait_ - 1, 13)));
    }
    room_wait_ = 0;
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
  op->first = p->offset >> grain_shift_;  // (shifts and masks: a division costs 10-40 cycles)
  op->count = ((p->offset + p->length - 1) >> grain_shift_) - op->first + 1;
  op->error.clear();
  op->locked = op->no_unit = false;
  op->room_tries = 0;
  op->slots.resize(op->count);
  for (uint64_t i = 0, pos = p->offset; i < op->count; ++i) {
    Slot& s = op->slots[i] = Slot{};
    s.v = op->first + i;
    s.in_off = static_cast<uint32_t>(pos & (grain_ - 1));
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
    internal::PhaseScope index(dev_, CpuPhase::kIndex);
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
    if (s.scratch == nullptr && encodes_to_scratch_) s.scratch = buffers_.Get(grain_);
    s.enc = dev_.Encode(state_.get(),
                        GrainWrite{s.v, reinterpret_cast<uint64_t>(op),
                                   s.scratch ? s.scratch->data() : nullptr, &map_, journal_},
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
    if (s.scratch == nullptr) s.scratch = buffers_.Get(grain_);  // the candidate's bytes
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
                                    (op->unmap ? uint32_t{kIoMayUnmap} : 0u)
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
  // The fragment's unit is referenced from now on, not from the remap: other pieces of the
  // write may still be below, and the layer may let go of the unit (Unhold) as soon as this
  // returns. Unreferenced, a commit meanwhile would free it under the fragment.
  s->enc.entry = status ? 0 : entry;
  if (UnitMap::HasUnit(s->enc.entry)) {
    std::lock_guard lock(journal_->mu);
    map_.AddRef(*journal_, UnitMap::UnitOf(s->enc.entry));
  }
  Piece(s->op, status);
}

void GrainQueue::WriteDone(Op* op) {
  if (op->error) {
    Undo(op, op->slots.size());
    // (Errc::kNoSpace compares equal to ENOSPC: a layer below that ran out says it that way.)
    const bool below = !op->no_unit && op->error == std::errc::no_space_on_device;
    // Space may come back: a commit frees what was released and (below) discards every free
    // unit; then the write runs again. Other queues go on meanwhile: they may release more
    // after the commit's cut, take what it freed, or still be reading a unit it released
    // (UnitMap's read generations: a later commit frees that one). So while the layer holds
    // units that no entry references, commit and try again, a bounded number of times.
    if ((below || op->no_unit) && !in_place_ && MayFindRoom(*op)) {
      room_wait_ = std::max(room_wait_, op->room_tries++);
      need_commit_ = true;
      commit_kind_ = below ? GrainDevice::CommitKind::kMakeRoom : GrainDevice::CommitKind::kDue;
      return Park(op, Stage::kEncode);
    }
    if (in_place_) dev_.WriteFailed(op->first, op->count);
    return Finish(op, op->error);
  }
  uint64_t zeros = 0;
  {
    internal::PhaseScope index(dev_, CpuPhase::kIndex);
    std::lock_guard lock(journal_->mu);
    for (Slot& s : op->slots) {
      const bool stored = s.enc.kind == Encoded::kStore && !in_place_;
      zeros += s.enc.kind == Encoded::kZero;
      map_.Remap(*journal_, s.v, stored ? UnitMap::EntryOf(s.enc.unit) : s.enc.entry,
                 s.enc.kind == Encoded::kShare || s.enc.kind == Encoded::kPack);
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

bool GrainQueue::MayFindRoom(const Op& op) const {
  if (op.room_tries == 0) return true;
  if (op.room_tries >= kMaxRoomTries) return false;
  // A commit frees the units nothing references (and, the device below being full, discards
  // them there); a unit free now is room for a write of ours.
  const UnitMap::Usage u = map_.usage();
  return u.allocated > u.used || (op.no_unit && map_.free_units() > 0);
}

void GrainQueue::Undo(Op* op, size_t slots) {
  std::lock_guard lock(journal_->mu);
  // A grain may share a unit that an earlier grain of this same write stores (dedup: a write
  // holding one grain twice). That unit was never mapped and is given back below, so its share
  // is cancelled, not released: a release would have the next commit free it a second time.
  const auto end = op->slots.begin() + static_cast<std::ptrdiff_t>(slots);
  auto stored_here = [&](uint64_t unit) {
    return !in_place_ && std::any_of(op->slots.begin(), end, [&](const Slot& t) {
             return t.enc.kind == Encoded::kStore && t.enc.unit == unit;
           });
  };
  for (size_t i = 0; i < slots; ++i) {
    Encoded& e = op->slots[i].enc;
    if (e.kind == Encoded::kPack && UnitMap::HasUnit(e.entry)) {
      map_.DropRef(*journal_, UnitMap::UnitOf(e.entry));  // a packed fragment's (Packed)
    }
    if (e.kind != Encoded::kShare) continue;
    const uint64_t unit = UnitMap::UnitOf(e.entry);
    if (stored_here(unit)) {
      map_.CancelRef(*journal_, unit);
    } else {
      map_.DropRef(*journal_, unit);
    }
    e = Encoded{};
  }
  for (size_t i = 0; i < slots; ++i) {
    Encoded& e = op->slots[i].enc;
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
    internal::PhaseScope submit(dev_, CpuPhase::kSubmit);
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
