// Allocation and group commit of the dynamic-disk queue: the write order of
// docs/layers/vhd.md ("Write order and guarantees") and vhd_dynamic.h.
#include <algorithm>

#include "formats/vhd/vhd_bitmap.h"
#include "formats/vhd/vhd_device.h"
#include "formats/vhd/vhd_dynamic_queue.h"
#include "lib/cpu_tag.h"
#include "lib/endian.h"
#include "lib/historical_bug.h"
#include "lib/iovec.h"

namespace vstack::vhd {

void DynamicQueue::JoinAllocation(Piece* p) {
  internal::PhaseScope metadata(device(), CpuPhase::kMetadata);
  auto it = st_.allocating.find(p->block);
  if (it != st_.allocating.end()) {
    Allocation* a = it->second;
    if (a->committing) {
      a->later.push_back(p);
      Count(kCounterWaits);
      return;
    }
    SetBits(a->bits.data(), p->first, p->count);
    a->pieces.push_back(p);
    want_commit_ = true;
    return;
  }
  auto a = std::make_unique<Allocation>();
  a->block = p->block;
  a->bits.assign(st_.bitmap_bytes, 0);
  SetBits(a->bits.data(), p->first, p->count);
  a->pieces.push_back(p);
  st_.allocating[p->block] = a.get();
  st_.open_group.push_back(std::move(a));
  want_commit_ = true;
}

void DynamicQueue::MaybeStartCommit() {
  if (!want_commit_) return;
  want_commit_ = false;
  {
    std::lock_guard lock(st_.mu);
    if (st_.committing || st_.open_group.empty()) return;
    st_.committing = true;
  }
  RunCommit();
}

void DynamicQueue::RunCommit() {
  internal::PhaseScope metadata(device(), CpuPhase::kMetadata);
  auto c = std::make_unique<Commit>();
  std::error_code error;
  bool grow = false;
  {
    std::lock_guard lock(st_.mu);
    c->allocs.swap(st_.open_group);
    if (c->allocs.empty()) {
      st_.committing = false;
      return;
    }
    uint64_t free = st_.next_free;
    for (auto& a : c->allocs) {
      a->committing = true;
      a->pos = PlaceBlock(free, st_.bitmap_bytes);
      if (st_.growable && a->pos + st_.bitmap_bytes + st_.block_size > st_.footer_at) {
        // Past the space already reserved: the file must grow. The old footer stays in a
        // gap, so that no bitmap or data area starts out holding its bytes.
        a->pos = PlaceBlock(std::max(free, st_.footer_at + kFooterSize), st_.bitmap_bytes);
        grow = true;
      }
      free = a->pos + st_.bitmap_bytes + st_.block_size;
      if (a->pos > kMaxBlockStart || free > st_.limit) error = make_error_code(Errc::kNoSpace);
    }
    st_.next_free = std::max(st_.next_free, free);  // a failed commit leaks its space
    c->footer_at = free;
    if (grow) {
      // Reserve room for the next blocks as well, so that their allocations need no flush.
      const uint64_t spare = std::min<uint64_t>(
          st_.reserve_blocks,
          st_.unallocated - std::min<uint64_t>(st_.unallocated, c->allocs.size()));
      for (uint64_t i = 0; i < spare; ++i) {
        const uint64_t p = PlaceBlock(c->footer_at, st_.bitmap_bytes);
        const uint64_t end = p + st_.bitmap_bytes + st_.block_size;
        if (p > kMaxBlockStart || end > st_.limit) break;
        c->footer_at = end;
      }
    }
  }
  commit_ = std::move(c);
  if (error) {
    FinishCommit(error);
    return;
  }
  Count(kCounterCommits);
  Count(kCounterAllocations, commit_->allocs.size());
  if (grow) {
    // Grow the file: the footer at the new end, durable (FUA) before anything else is
    // written, so that the file never ends without a footer and no BAT entry can point past
    // its end, whatever reaches the disk first. FUA makes only this write durable (a flush
    // would also write back every dirty page of the file).
    Status grown = st_.lower.Resize(commit_->footer_at + kFooterSize);
    if (!grown) {
      FinishCommit(grown.error().code);
      return;
    }
    LowerOp* op = NewOp(Kind::kCommit);
    SetPayload(op, Op::kWrite, commit_->footer_at, st_.footer_bytes.data(), kFooterSize);
    op->req.flags = kIoFua;
    Count(kCounterFooterWrites);
    commit_->stage = Stage::kGrow;
    commit_->pending = 1;
    Issue(op);
  } else if (st_.growable) {
    StageInReservedSpace();
  } else {
    commit_->stage = Stage::kBlocks;
    StageBitmaps();
    StageData();
  }
}

void DynamicQueue::StageInReservedSpace() {
  if (st_.parent != nullptr && !Reintroduced(HistoricalBug::kDiffBitsBeforeData)) {
    // Differencing: a set bit hides the parent, so it may not reach the disk before the data
    // it covers: data first, a flush, then bitmaps and BAT (a crash in between shows the
    // parent's data, the old contents, where a bitmap landed without its data).
    commit_->stage = Stage::kData;
    StageData();
    return;
  }
  // The new space is durable and reads as zeros, so a BAT entry or bitmap that lands before
  // the data shows zeros, the old contents of an unallocated block: all go down together,
  // with no flush.
  commit_->stage = Stage::kBlocksAndBat;
  StageBitmaps();
  StageData();
  StageBat();
}

void DynamicQueue::OnCommitOp(std::error_code ec) {
  internal::PhaseScope metadata(device(), CpuPhase::kMetadata);
  Commit& c = *commit_;
  if (ec && !c.error) c.error = ec;
  if (--c.pending > 0) return;
  if (c.error) {
    if (c.stage == Stage::kGrow) {
      // The file grew, but its new end has no footer: cut it back to the old footer, so that
      // the image keeps its last committed state (ENOSPC: the footer write is what fails).
      uint64_t old_end;
      {
        std::lock_guard lock(st_.mu);
        old_end = st_.footer_at + kFooterSize;
      }
      (void)st_.lower.Resize(old_end);  // best effort: the commit fails either way
    } else if (c.stage == Stage::kBlocksAndBat || c.stage == Stage::kBitmapsAndBat ||
               c.stage == Stage::kBat) {
      // Some BAT sectors may have reached the disk with entries for blocks that are not
      // published: after a reopen they would show the failed writes' data over whatever
      // succeeded since (a write-zeroes that found the block unallocated). Write them again
      // as memory has them before the writes fail, so that a flush after the failure covers it.
      c.stage = Stage::kUndoBat;
      c.undone = c.error;
      c.error = {};
      StageBat(/*new_entries=*/false);
      return;
    } else if (c.stage == Stage::kUndoBat) {
      std::lock_guard lock(st_.mu);  // the undo failed too: the next commit tries again
      st_.stale_bat_sectors.insert(st_.stale_bat_sectors.end(), c.bat_sectors.begin(),
                                   c.bat_sectors.end());
      c.error = c.undone;
    }
    FinishCommit(c.error);
    return;
  }
  switch (c.stage) {
    case Stage::kGrow: {
      std::lock_guard lock(st_.mu);
      st_.footer_at = c.footer_at;  // the reservation is durable
    }
      StageInReservedSpace();
      return;
    case Stage::kBlocks:
    case Stage::kData:
      c.stage = c.stage == Stage::kData ? Stage::kDataFlush : Stage::kBlocksFlush;
      IssueCommitFlush();
      return;
    case Stage::kBlocksFlush:
      c.stage = Stage::kBat;
      StageBat();
      return;
    case Stage::kDataFlush:
      c.stage = Stage::kBitmapsAndBat;
      StageBitmaps();
      StageBat();
      return;
    case Stage::kBlocksAndBat:
    case Stage::kBitmapsAndBat:
    case Stage::kBat:
      FinishCommit({});
      return;
    case Stage::kUndoBat:
      FinishCommit(c.undone);
      return;
  }
}

void DynamicQueue::IssueCommitFlush() {
  LowerOp* op = NewOp(Kind::kCommit);
  op->req.op = Op::kFlush;
  Count(kCounterMetaFlushes);
  commit_->pending = 1;
  Issue(op);
}

void DynamicQueue::StageBitmaps() {
  Commit& c = *commit_;
  for (auto& a : c.allocs) {
    LowerOp* bm = NewOp(Kind::kCommit);
    SetPayload(bm, Op::kWrite, a->pos, a->bits.data(), st_.bitmap_bytes);
    Issue(bm);
    ++c.pending;
    Count(kCounterBitmapWrites);
  }
}

void DynamicQueue::StageData() {
  Commit& c = *commit_;
  for (auto& a : c.allocs) {
    const uint64_t data = a->pos + st_.bitmap_bytes;
    for (Piece* p : a->pieces) {
      const IoRequest& parent = *p->req->done.parent();
      LowerOp* op = NewOp(Kind::kCommit);
      op->req.op = Op::kWrite;
      op->req.offset = data + uint64_t{p->first} * kSectorSize;
      op->req.length = uint64_t{p->count} * kSectorSize;
      IovSlice(parent.iov, parent.iovcnt, p->buf_offset, op->req.length, &op->iov);
      op->req.iov = op->iov.data();
      op->req.iovcnt = static_cast<uint32_t>(op->iov.size());
      Issue(op);
      ++c.pending;
    }
    if (!st_.growable) {
      for (uint32_t s = 0; s < st_.sectors_per_block;) {
        const uint32_t n = RunLength(a->bits.data(), s, st_.sectors_per_block);
        if (!TestBit(a->bits.data(), s)) {
          LowerOp* z = NewOp(Kind::kCommit);
          z->req.op = Op::kWriteZeroes;
          z->req.flags = kIoMayUnmap;
          z->req.offset = data + uint64_t{s} * kSectorSize;
          z->req.length = uint64_t{n} * kSectorSize;
          Issue(z);
          ++c.pending;
        }
        s += n;
      }
    }
  }
}

void DynamicQueue::StageBat(bool new_entries) {
  Commit& c = *commit_;
  std::vector<uint64_t> sectors;
  for (auto& a : c.allocs) sectors.push_back(a->block / kEntriesPerBatSector);
  sectors.insert(sectors.end(), c.bat_sectors.begin(), c.bat_sectors.end());
  {
    std::lock_guard lock(st_.mu);
    sectors.insert(sectors.end(), st_.stale_bat_sectors.begin(), st_.stale_bat_sectors.end());
    st_.stale_bat_sectors.clear();
  }
  std::sort(sectors.begin(), sectors.end());
  sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
  c.bat_sectors = sectors;
  for (uint64_t sector : sectors) {
    LowerOp* op = NewOp(Kind::kCommit);
    SetPayload(op, Op::kWrite, st_.bat_offset + sector * kSectorSize, nullptr, kSectorSize);
    auto* bytes = reinterpret_cast<uint8_t*>(op->buf.data());
    st_.bat.SerializeSector(sector, std::span<uint8_t, kSectorSize>(bytes, kSectorSize));
    for (auto& a : c.allocs) {
      if (!new_entries || a->block / kEntriesPerBatSector != sector) continue;
      StoreBE32(bytes + 4 * (a->block % kEntriesPerBatSector),
                static_cast<uint32_t>(a->pos / kSectorSize));
    }
    Issue(op);
    ++c.pending;
    Count(kCounterBatWrites);
  }
}

void DynamicQueue::FinishCommit(std::error_code ec) {
  std::unique_ptr<Commit> c = std::move(commit_);
  std::vector<Piece*> done, later;
  DynamicQueue* next = nullptr;
  bool self = false;
  {
    std::lock_guard lock(st_.mu);
    for (auto& a : c->allocs) {
      st_.allocating.erase(a->block);
      if (!ec) {
        const bool full = AllSet(a->bits.data(), 0, st_.sectors_per_block);
        if (!full) {
          auto bs = std::make_unique<BitmapState>();
          bs->loaded = true;
          // A dynamic disk's new block: its clear sectors are zeros (reserved space, or
          // zeros written by the commit over a fixed-size device).
          bs->clear_zero = st_.parent == nullptr;
          bs->mem = a->bits;
          bs->disk = a->bits;
          st_.bitmaps[a->block] = std::move(bs);
          st_.EvictIdleBitmaps();
        }
        st_.bat.Publish(a->block, static_cast<uint32_t>(a->pos / kSectorSize),
                        full ? Bat::kFull : 0);
        if (st_.unallocated > 0) --st_.unallocated;
      }
      done.insert(done.end(), a->pieces.begin(), a->pieces.end());
      later.insert(later.end(), a->later.begin(), a->later.end());
    }
    // The next commit goes to a queue with a write in the open group: it keeps polling.
    for (auto& a : st_.open_group) {
      for (Piece* p : a->pieces) {
        if (p->req->owner == this) self = true;
        if (next == nullptr) next = p->req->owner;
      }
    }
    if (st_.open_group.empty()) {
      st_.committing = false;
      next = nullptr;
    } else if (self) {
      next = nullptr;
    }
  }
  for (Piece* p : done) Finish(p->req, ec);
  for (Piece* p : later) Redo(p, Action::kTranslate);
  if (self) {
    RunCommit();
  } else if (next != nullptr) {
    next->Kick();
  }
}

}  // namespace vstack::vhd
