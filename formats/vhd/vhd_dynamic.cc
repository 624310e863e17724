#include "formats/vhd/vhd_dynamic.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "formats/vhd/vhd_bitmap.h"
#include "formats/vhd/vhd_device.h"
#include "lib/aligned_buffer.h"
#include "lib/endian.h"
#include "lib/iovec.h"
#include "lib/layer.h"
#include "lib/sync_io.h"

namespace vstack::vhd {

class DynamicQueue;
struct Piece;

// One caller's request, split into pieces that each stay within one block. `pending` counts
// the units still outstanding (pieces, plus extra lower requests and bitmap writes some
// pieces need); whoever finishes the last one completes the request.
struct Request {
  IoRequest* parent = nullptr;
  DynamicQueue* owner = nullptr;
  std::atomic<uint32_t> pending{0};
  std::atomic<bool> failed{false};
  std::error_code error;  // written once, by the thread that set `failed`
  std::vector<Piece> pieces;
};

struct Piece {
  Request* req = nullptr;
  uint32_t block = 0;
  uint32_t first = 0;       // first sector within the block
  uint32_t count = 0;       // sectors
  uint64_t buf_offset = 0;  // byte offset of this piece in the caller's buffers
};

// The bitmap of a partially written block. `disk` is what completed writes put on disk;
// `mem` adds the bits of writes whose bitmap update is pending; `inflight` is the copy being
// written. A write completes only once its bits are in `disk`.
struct BitmapState {
  std::vector<uint8_t> mem, disk, inflight;
  bool loaded = false, loading = false, writing = false;
  std::vector<Piece*> wait_load;   // to translate again once loaded
  std::vector<Piece*> wait_write;  // bits are in `inflight`
  std::vector<Piece*> wait_next;   // bits are only in `mem`
};

// A block being allocated: open (collecting writes) until a commit takes it.
struct Allocation {
  uint32_t block = 0;
  bool committing = false;
  uint64_t pos = 0;            // byte offset of its bitmap
  std::vector<uint8_t> bits;   // the sectors its writes cover
  std::vector<Piece*> pieces;  // written by the commit
  std::vector<Piece*> later;   // arrived during the commit: translated again afterwards
};

DynamicState::DynamicState(BlockDevice& lower_device, const VhdImage& image, uint64_t reserve)
    : lower(lower_device),
      block_size(image.header.block_size),
      bitmap_bytes(image.header.bitmap_bytes()),
      sectors_per_block(image.header.block_size / kSectorSize),
      bat_offset(image.header.table_offset),
      footer_bytes(image.footer_bytes),
      growable(image.growable),
      limit(image.growable ? kMaxBlockStart + image.header.bitmap_bytes() + image.header.block_size
                           : image.footer_offset),
      reserve_blocks(reserve / image.header.block_size),
      bat(image.bat),
      next_free(image.growable ? std::max(image.data_end, image.footer_offset) : image.data_end),
      footer_at(image.footer_offset) {
  for (uint32_t i : image.unusable) bat.SetFlags(i, Bat::kUnusable);
  for (uint64_t i = 0; i < image.blocks_needed; ++i) {
    if (image.bat[i] == kUnallocated) ++unallocated;
  }
}

DynamicState::~DynamicState() = default;

void DynamicState::EvictIdleBitmaps() {
  if (bitmaps.size() <= max_cached_bitmaps) return;
  for (auto it = bitmaps.begin();
       it != bitmaps.end() && bitmaps.size() > max_cached_bitmaps * 3 / 4;) {
    const BitmapState& b = *it->second;
    const bool idle = b.loaded && !b.loading && !b.writing && b.wait_load.empty() &&
                      b.wait_write.empty() && b.wait_next.empty() && b.mem == b.disk;
    it = idle ? bitmaps.erase(it) : std::next(it);
  }
}

uint64_t DynamicState::FooterOffset() {
  std::lock_guard lock(mu);
  return growable ? footer_at : limit;
}

Status DynamicState::TrimReservation() {
  uint64_t end;
  {
    std::lock_guard lock(mu);
    if (!growable || footer_at <= next_free) return OkStatus();
    end = next_free;
  }
  SyncIo io(lower);
  AlignedBuffer footer(kFooterSize, 4096);
  std::memcpy(footer.data(), footer_bytes.data(), kFooterSize);
  if (std::error_code ec = io.Write(end, footer.span())) {
    return MakeError(ec, "vhd: writing the footer at offset " + std::to_string(end) + ": " +
                             ec.message());
  }
  if (std::error_code ec = io.Flush()) {
    return MakeError(ec, "vhd: flush before trimming the file failed: " + ec.message());
  }
  VSTACK_RETURN_IF_ERROR(lower.Resize(end + kFooterSize));
  std::lock_guard lock(mu);
  footer_at = end;
  return OkStatus();
}

class DynamicQueue final : public LayerQueue {
 public:
  DynamicQueue(BlockDevice& device, DynamicState& state, std::unique_ptr<IoQueue> lower)
      : LayerQueue(device, std::move(lower)), st_(state) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    DrainInbox();
    for (IoRequest* parent : batch) Start(*parent);
    AfterWork();
  }

  void DoPoll(bool wait) override {
    bool did = DrainInbox();
    if (did) AfterWork();
    if (lower().in_flight() > 0) {
      lower().Poll(wait && !did ? 1 : 0);
    } else {
      lower().Poll(0);
      if (wait && !did) std::this_thread::yield();
    }
    if (DrainInbox()) AfterWork();
  }

 private:
  enum class Kind : uint8_t { kPiece, kFlush, kBitmapRead, kBitmapWrite, kCommit };
  enum class Action : uint8_t { kTranslate, kBitmapWait };

  // A request this queue sends down.
  struct LowerOp {
    IoRequest req;
    std::vector<iovec> iov;
    AlignedBuffer buf;  // metadata payload
    DynamicQueue* queue = nullptr;
    Kind kind = Kind::kPiece;
    Request* request = nullptr;   // kPiece: the unit it finishes
    IoRequest* parent = nullptr;  // kFlush
    uint32_t block = 0;           // bitmap I/O
  };

  struct Handoff {
    Piece* piece;
    Action action;
  };

  // The steps of an allocation commit (docs/layers/vhd.md, "Write order").
  enum class Stage : uint8_t {
    kGrow,          // growable: the footer at the new end of the file, with FUA
    kBlocksAndBat,  // growable: bitmaps, data and BAT sectors, all at once
    kBlocks,        // fixed-size device: bitmaps, data and zeros over stale free space
    kBlocksFlush,   // ... made durable before the BAT points at them
    kBat,           // fixed-size device: the BAT sectors
  };

  // The commit this queue is running (one at a time per device).
  struct Commit {
    std::vector<std::unique_ptr<Allocation>> allocs;
    uint64_t footer_at = 0;
    Stage stage = Stage::kGrow;
    uint32_t pending = 0;
    std::error_code error;
  };

  // ---- requests and completion ----

  void Start(IoRequest& parent) {
    if (parent.op == Op::kFlush) {
      LowerOp* op = NewOp(Kind::kFlush);
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
    r->parent = &parent;
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
    r->pending.store(static_cast<uint32_t>(r->pieces.size()) + 1, std::memory_order_relaxed);
    for (Piece& p : r->pieces) Translate(&p);
    Finish(r, {});
  }

  Request* NewRequest() {
    Request* r = requests_.Get();
    r->owner = this;
    r->failed.store(false, std::memory_order_relaxed);
    r->error.clear();
    r->pieces.clear();
    return r;
  }

  // Finishes one unit of `r`; the last one completes the caller's request.
  void Finish(Request* r, std::error_code ec) {
    if (ec && !r->failed.exchange(true, std::memory_order_relaxed)) r->error = ec;
    if (r->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    IoRequest* parent = r->parent;
    const std::error_code status = r->error;
    DynamicQueue* owner = r->owner;
    if (owner == this) {
      Complete(*parent, status);
      requests_.Put(r);
    } else {
      owner->Give(r);
      owner->PostCompletion(*parent, status);  // `owner` may be gone after this
    }
  }

  // ---- translation ----

  void Translate(Piece* p) {
    Request* r = p->req;
    const Op op = r->parent->op;
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
    SetBits(bs.mem.data(), p->first, p->count);
    r->pending.fetch_add(1, std::memory_order_relaxed);  // the bitmap write is a second unit
    std::vector<uint8_t> snapshot;
    const bool start = WaitForBitmap(bs, p, &snapshot);
    lock.unlock();
    IssueData(p, entry, p->first, p->count);
    if (start) IssueBitmapWrite(p->block, entry, snapshot);
  }

  // Queues `p` behind the bitmap write that will carry its bits. Returns true (and the bits
  // to write) if the caller must start that write now. REQUIRES: st_.mu held.
  bool WaitForBitmap(BitmapState& bs, Piece* p, std::vector<uint8_t>* snapshot) {
    if (bs.writing && AllSet(bs.inflight.data(), p->first, p->count)) {
      bs.wait_write.push_back(p);
      return false;
    }
    bs.wait_next.push_back(p);
    if (bs.writing) return false;
    bs.writing = true;
    bs.inflight = bs.mem;
    bs.wait_write.swap(bs.wait_next);
    *snapshot = bs.inflight;
    return true;
  }

  // A piece handed back after the bitmap write it waited for left its bits out.
  void ResumeBitmapWait(Piece* p) {
    std::unique_lock lock(st_.mu);
    auto it = st_.bitmaps.find(p->block);
    if (it == st_.bitmaps.end() || AllSet(it->second->disk.data(), p->first, p->count)) {
      lock.unlock();  // the block became full: its bits are on disk
      Finish(p->req, {});
      return;
    }
    std::vector<uint8_t> snapshot;
    const bool start = WaitForBitmap(*it->second, p, &snapshot);
    lock.unlock();
    if (start) IssueBitmapWrite(p->block, st_.bat.entry(p->block), snapshot);
  }

  void ZeroPiece(Piece* p) {
    if (p->req->parent->op == Op::kRead) {
      const IoRequest& parent = *p->req->parent;
      ZeroIov(parent.iov, parent.iovcnt, p->buf_offset, uint64_t{p->count} * kSectorSize);
      Count(kCounterZeroReads);
    }
    Finish(p->req, {});
  }

  void ReadRuns(Piece* p) {
    const IoRequest& parent = *p->req->parent;
    const uint32_t entry = st_.bat.entry(p->block);
    uint32_t data_runs = 0;
    for (const Run& run : runs_) data_runs += run.set ? 1 : 0;
    if (data_runs > 1) p->req->pending.fetch_add(data_runs - 1, std::memory_order_relaxed);
    for (const Run& run : runs_) {
      if (!run.set) {
        ZeroIov(parent.iov, parent.iovcnt,
                p->buf_offset + uint64_t{run.first - p->first} * kSectorSize,
                uint64_t{run.count} * kSectorSize);
      }
    }
    if (data_runs == 0) {
      Count(kCounterZeroReads);
      Finish(p->req, {});
      return;
    }
    for (const Run& run : runs_) {
      if (run.set) IssueData(p, entry, run.first, run.count);
    }
  }

  // Reads, writes or zeroes sectors [first, first + count) of `p`'s block, at `entry`.
  void IssueData(Piece* p, uint32_t entry, uint32_t first, uint32_t count) {
    const IoRequest& parent = *p->req->parent;
    LowerOp* op = NewOp(Kind::kPiece);
    op->request = p->req;
    op->req.op = parent.op;
    op->req.flags = parent.flags & (kIoMayUnmap | kIoFastZero);
    op->req.offset = uint64_t{entry} * kSectorSize + st_.bitmap_bytes + uint64_t{first} * kSectorSize;
    op->req.length = uint64_t{count} * kSectorSize;
    if (parent.op != Op::kWriteZeroes) {
      IovSlice(parent.iov, parent.iovcnt,
               p->buf_offset + uint64_t{first - p->first} * kSectorSize, op->req.length,
               &op->iov);
      op->req.iov = op->iov.data();
      op->req.iovcnt = static_cast<uint32_t>(op->iov.size());
    }
    Issue(op);
  }

  // ---- bitmaps ----

  void IssueBitmapRead(uint32_t block, uint32_t entry) {
    LowerOp* op = NewOp(Kind::kBitmapRead);
    op->block = block;
    SetPayload(op, Op::kRead, uint64_t{entry} * kSectorSize, nullptr, st_.bitmap_bytes);
    Count(kCounterBitmapReads);
    Issue(op);
  }

  void IssueBitmapWrite(uint32_t block, uint32_t entry, const std::vector<uint8_t>& bits) {
    LowerOp* op = NewOp(Kind::kBitmapWrite);
    op->block = block;
    SetPayload(op, Op::kWrite, uint64_t{entry} * kSectorSize, bits.data(), st_.bitmap_bytes);
    Count(kCounterBitmapWrites);
    Issue(op);
  }

  void OnBitmapRead(LowerOp* op, std::error_code ec) {
    std::vector<Piece*> waiters;
    {
      std::lock_guard lock(st_.mu);
      auto it = st_.bitmaps.find(op->block);
      BitmapState& bs = *it->second;
      bs.loading = false;
      waiters.swap(bs.wait_load);
      if (!ec) {
        const auto* p = reinterpret_cast<const uint8_t*>(op->buf.data());
        bs.mem.assign(p, p + st_.bitmap_bytes);
        bs.disk = bs.mem;
        bs.loaded = true;
        if (AllSet(bs.disk.data(), 0, st_.sectors_per_block)) {
          st_.bat.SetFlags(op->block, Bat::kFull);
          st_.bitmaps.erase(it);
        }
      } else {
        st_.bitmaps.erase(it);  // the next access tries again
      }
    }
    for (Piece* p : waiters) {
      if (ec) {
        Finish(p->req, ec);
      } else {
        Redo(p, Action::kTranslate);
      }
    }
  }

  void OnBitmapWrite(LowerOp* op, std::error_code ec) {
    std::vector<Piece*> done, retry;
    std::vector<uint8_t> snapshot;
    bool start = false;
    {
      std::lock_guard lock(st_.mu);
      auto it = st_.bitmaps.find(op->block);
      BitmapState& bs = *it->second;
      bs.writing = false;
      if (!ec) bs.disk = bs.inflight;
      done.swap(bs.wait_write);
      for (Piece* p : bs.wait_next) {
        (!ec && AllSet(bs.disk.data(), p->first, p->count) ? done : retry).push_back(p);
      }
      bs.wait_next.clear();
      const bool mine = std::any_of(retry.begin(), retry.end(),
                                    [&](Piece* p) { return p->req->owner == this; });
      if (mine) {  // this queue keeps polling for its own piece: it writes the next copy
        start = true;
        bs.writing = true;
        bs.inflight = bs.mem;
        bs.wait_write.swap(retry);
        snapshot = bs.inflight;
      }
      if (!ec && !bs.writing && bs.wait_load.empty() &&
          AllSet(bs.disk.data(), 0, st_.sectors_per_block)) {
        st_.bat.SetFlags(op->block, Bat::kFull);
        st_.bitmaps.erase(it);
      }
    }
    for (Piece* p : done) Finish(p->req, ec);
    if (start) IssueBitmapWrite(op->block, st_.bat.entry(op->block), snapshot);
    for (Piece* p : retry) Redo(p, Action::kBitmapWait);
  }

  // ---- allocation and group commit ----

  // REQUIRES: st_.mu held (released on return).
  void JoinAllocation(Piece* p) {
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

  // Starts a commit if this queue added blocks and nobody holds the commit role.
  void MaybeStartCommit() {
    if (!want_commit_) return;
    want_commit_ = false;
    {
      std::lock_guard lock(st_.mu);
      if (st_.committing || st_.open_group.empty()) return;
      st_.committing = true;
    }
    RunCommit();
  }

  // Commits the open group. REQUIRES: this queue holds the commit role.
  void RunCommit() {
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
        const uint64_t spare =
            std::min<uint64_t>(st_.reserve_blocks, st_.unallocated - std::min<uint64_t>(
                                                                       st_.unallocated,
                                                                       c->allocs.size()));
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
      // Inside space reserved (and made durable) earlier: no flush at all.
      commit_->stage = Stage::kBlocksAndBat;
      StageBlocks();
      StageBat();
    } else {
      commit_->stage = Stage::kBlocks;
      StageBlocks();
    }
  }

  void OnCommitOp(std::error_code ec) {
    Commit& c = *commit_;
    if (ec && !c.error) c.error = ec;
    if (--c.pending > 0) return;
    if (c.error) {
      FinishCommit(c.error);
      return;
    }
    switch (c.stage) {
      case Stage::kGrow: {
        std::lock_guard lock(st_.mu);
        st_.footer_at = c.footer_at;  // the reservation is durable
      }
        // The new space is durable and reads as zeros, so a BAT entry that lands before its
        // bitmap and data shows an empty block: the three go down together.
        c.stage = Stage::kBlocksAndBat;
        StageBlocks();
        StageBat();
        return;
      case Stage::kBlocks:
        c.stage = Stage::kBlocksFlush;
        IssueCommitFlush();
        return;
      case Stage::kBlocksFlush:
        c.stage = Stage::kBat;
        StageBat();
        return;
      case Stage::kBlocksAndBat:
      case Stage::kBat:
        FinishCommit({});
        return;
    }
  }

  void IssueCommitFlush() {
    LowerOp* op = NewOp(Kind::kCommit);
    op->req.op = Op::kFlush;
    Count(kCounterMetaFlushes);
    commit_->pending = 1;
    Issue(op);
  }

  // Bitmaps with the exact bits, the data of the writes, and (over a fixed-size device whose
  // free space may hold old bytes) zeros for the rest of each block. Adds to `pending`.
  void StageBlocks() {
    Commit& c = *commit_;
    for (auto& a : c.allocs) {
      LowerOp* bm = NewOp(Kind::kCommit);
      SetPayload(bm, Op::kWrite, a->pos, a->bits.data(), st_.bitmap_bytes);
      Issue(bm);
      ++c.pending;
      Count(kCounterBitmapWrites);
      const uint64_t data = a->pos + st_.bitmap_bytes;
      for (Piece* p : a->pieces) {
        const IoRequest& parent = *p->req->parent;
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

  // The BAT sectors holding the new entries, one write per sector. Adds to `pending`.
  void StageBat() {
    Commit& c = *commit_;
    std::vector<uint64_t> sectors;
    for (auto& a : c.allocs) sectors.push_back(a->block / kEntriesPerBatSector);
    std::sort(sectors.begin(), sectors.end());
    sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
    for (uint64_t sector : sectors) {
      LowerOp* op = NewOp(Kind::kCommit);
      SetPayload(op, Op::kWrite, st_.bat_offset + sector * kSectorSize, nullptr, kSectorSize);
      auto* bytes = reinterpret_cast<uint8_t*>(op->buf.data());
      st_.bat.SerializeSector(sector, std::span<uint8_t, kSectorSize>(bytes, kSectorSize));
      for (auto& a : c.allocs) {
        if (a->block / kEntriesPerBatSector != sector) continue;
        StoreBE32(bytes + 4 * (a->block % kEntriesPerBatSector),
                  static_cast<uint32_t>(a->pos / kSectorSize));
      }
      Issue(op);
      ++c.pending;
      Count(kCounterBatWrites);
    }
  }

  // Publishes the entries (unless the commit failed: then the blocks are leaked), completes
  // the writes, translates the late arrivals again, and passes the commit role on.
  void FinishCommit(std::error_code ec) {
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

  // ---- hand-offs between queues ----

  // Runs `action` for `p` on its own queue: here if it is ours, else through its inbox.
  void Redo(Piece* p, Action action) {
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

  void Hand(Handoff h) {
    std::lock_guard lock(inbox_mu_);
    inbox_.push_back(h);
    inbox_flag_.store(true, std::memory_order_release);
  }
  void Kick() {
    std::lock_guard lock(inbox_mu_);
    kick_ = true;
    inbox_flag_.store(true, std::memory_order_release);
  }
  void Give(Request* r) {
    std::lock_guard lock(inbox_mu_);
    returned_.push_back(r);
    inbox_flag_.store(true, std::memory_order_release);
  }

  // Runs what other queues handed over. Returns true if there was work.
  bool DrainInbox() {
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

  void AfterWork() {
    MaybeStartCommit();
    FlushOutgoing();
  }

  // ---- lower requests ----

  LowerOp* NewOp(Kind kind) {
    LowerOp* op = ops_.Get();
    op->req = IoRequest{};
    op->req.on_complete = &DynamicQueue::OnLowerDone;
    op->req.user_data = op;
    op->iov.clear();
    op->queue = this;
    op->kind = kind;
    op->request = nullptr;
    op->parent = nullptr;
    return op;
  }

  // Makes `op` a read or write of `len` metadata bytes at `offset` through its own buffer,
  // filled from `src` (a write; nullptr leaves it for the caller to fill).
  void SetPayload(LowerOp* op, Op rw, uint64_t offset, const void* src, size_t len) {
    if (op->buf.size() < len) op->buf = AlignedBuffer(len, 4096);
    if (src != nullptr) std::memcpy(op->buf.data(), src, len);
    op->req.op = rw;
    op->req.offset = offset;
    op->req.length = len;
    op->iov.assign(1, iovec{op->buf.data(), len});
    op->req.iov = op->iov.data();
    op->req.iovcnt = 1;
  }

  void Issue(LowerOp* op) { outgoing_.push_back(&op->req); }

  void FlushOutgoing() {
    while (!outgoing_.empty()) {
      std::vector<IoRequest*> batch;
      batch.swap(outgoing_);
      lower().Submit(batch);
    }
  }

  static void OnLowerDone(IoRequest& req) {
    LowerOp* op = static_cast<LowerOp*>(req.user_data);
    DynamicQueue* q = op->queue;
    const std::error_code ec = req.status;
    switch (op->kind) {
      case Kind::kPiece: q->Finish(op->request, ec); break;
      case Kind::kFlush: q->Complete(*op->parent, ec); break;
      case Kind::kBitmapRead: q->OnBitmapRead(op, ec); break;
      case Kind::kBitmapWrite: q->OnBitmapWrite(op, ec); break;
      case Kind::kCommit: q->OnCommitOp(ec); break;
    }
    q->ops_.Put(op);
    q->AfterWork();
  }

  struct Run {
    uint32_t first, count;
    bool set;
  };

  DynamicState& st_;
  RequestPool<Request> requests_;
  RequestPool<LowerOp> ops_;
  std::vector<IoRequest*> outgoing_;
  std::vector<Run> runs_;
  std::unique_ptr<Commit> commit_;
  bool want_commit_ = false;

  std::mutex inbox_mu_;
  std::atomic<bool> inbox_flag_{false};
  std::vector<Handoff> inbox_;      // guarded by inbox_mu_
  std::vector<Request*> returned_;  // guarded by inbox_mu_
  bool kick_ = false;               // guarded by inbox_mu_: take over the commit role
};

std::unique_ptr<IoQueue> NewDynamicQueue(BlockDevice& device, DynamicState& state,
                                         std::unique_ptr<IoQueue> lower) {
  return std::make_unique<DynamicQueue>(device, state, std::move(lower));
}

Status MapDynamicExtents(DynamicState& st, uint64_t offset, uint64_t length,
                         std::vector<Extent>* out) {
  const uint64_t end = offset + length;
  std::unique_ptr<SyncIo> io;
  std::vector<uint8_t> bits;
  for (uint64_t pos = offset; pos < end;) {
    const uint32_t block = static_cast<uint32_t>(pos / st.block_size);
    const uint64_t block_start = uint64_t{block} * st.block_size;
    const uint64_t stop = std::min(end, block_start + st.block_size);
    const uint32_t entry = st.bat.entry(block);
    const uint8_t flags = st.bat.flags(block);
    if (entry == kUnallocated) {
      AppendExtent(out, pos, stop - pos, kExtentHole | kExtentZero);
      pos = stop;
      continue;
    }
    if (flags & (Bat::kFull | Bat::kUnusable)) {
      AppendExtent(out, pos, stop - pos, 0);
      pos = stop;
      continue;
    }
    bool have = false;
    {
      std::lock_guard lock(st.mu);
      auto it = st.bitmaps.find(block);
      if (it != st.bitmaps.end() && it->second->loaded) {
        bits = it->second->mem;
        have = true;
      }
    }
    if (!have) {
      if (!io) io = std::make_unique<SyncIo>(st.lower);
      AlignedBuffer buf(st.bitmap_bytes, 4096);
      if (std::error_code ec = io->Read(uint64_t{entry} * kSectorSize, buf.span())) {
        return MakeError(ec, "VHD: cannot read the bitmap of block " + std::to_string(block));
      }
      const auto* p = reinterpret_cast<const uint8_t*>(buf.data());
      bits.assign(p, p + st.bitmap_bytes);
    }
    uint32_t s = static_cast<uint32_t>((pos - block_start) / kSectorSize);
    const uint32_t last = static_cast<uint32_t>((stop - block_start) / kSectorSize);
    while (s < last) {
      const uint32_t n = RunLength(bits.data(), s, last);
      AppendExtent(out, block_start + uint64_t{s} * kSectorSize, uint64_t{n} * kSectorSize,
                   TestBit(bits.data(), s) ? 0u : uint32_t{kExtentZero});
      s += n;
    }
    pos = stop;
  }
  return OkStatus();
}

}  // namespace vstack::vhd
