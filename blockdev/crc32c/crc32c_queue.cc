// The crc32c data path. Data stays in place, so a request becomes at most three lower requests:
// the whole grains in the middle go down in one piece straight from the caller's buffers, and a
// partial grain at either end is a read-modify-write of that grain through a buffer.
//
//   write:  touch its regions (marking them dirty on disk first if needed, which blocks) ->
//           lock its grains -> checksum -> register the new checksums as pending -> write ->
//           store the checksums, unlock
//   read:   read -> verify every grain against its checksum or a pending one. A read that
//           overlaps a write may see a grain half old, half new (blocks are atomic, grains are
//           not), so a grain that mismatches is read again holding the grains' write locks,
//           which makes the data stable; a mismatch then fails the read with
//           Errc::kChecksumMismatch (the caller's buffer is zeroed: no bad data goes up)
#include <cassert>
#include <cstring>

#include "blockdev/metastore/crc32c.h"
#include "blockdev/crc32c/crc32c_device.h"
#include "blockdev/metastore/grain_io.h"
#include "blockdev/grainmap/grain_queue.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"

namespace vstack {
namespace {

class Crc32cQueue final : public GrainQueue {
 public:
  Crc32cQueue(Crc32cDevice& dev, std::unique_ptr<IoQueue> lower)
      : GrainQueue(dev, std::move(lower), dev.grain()), dev_(dev), table_(dev.table()) {}

 protected:
  Status CommitForFlush() override { return dev_.Commit(); }

 private:
  struct Piece;

  enum WaiterKind { kWritePiece, kLockedRead };

  // One caller's request.
  struct Ctx : Waiter {
    PendingParent done;  // its pieces outstanding, first error
    uint64_t first_grain = 0, last_grain = 0;
    bool is_read = false;
    // Reads: every piece, verified together once all are in.
    std::vector<Piece*> pieces;
    bool locked = false;  // reads: the second attempt, holding the grains' locks
  };

  // A run of whole grains (read or written in place, from the caller's buffers when they suit
  // the device below), or one partial grain through a buffer.
  struct Piece : Waiter {
    Crc32cQueue* q = nullptr;
    Ctx* ctx = nullptr;
    bool partial = false;
    bool rmw_read = false;         // a partial write's read step
    uint64_t first_grain = 0;
    uint64_t grains = 0;
    uint64_t iov_off = 0;          // the piece's bytes in the caller's iovecs
    uint32_t in_off = 0, len = 0;  // partial: the caller's part of the grain
    std::vector<uint32_t> crcs;    // writes: the new checksums
    AlignedBuffer* buf = nullptr;  // partial: the grain; run: a bounce buffer (or null)
    IoRequest lower;
    std::vector<iovec> iov;
  };

  uint64_t GrainOffset(uint64_t g) const { return dev_.data_offset() + g * grain_; }

  void StartRead(IoRequest* parent, std::vector<IoRequest*>& out) override;
  void IssueRead(Piece* p, std::vector<IoRequest*>& out);
  void VerifyRead(Ctx* ctx);
  bool LockGrains(uint64_t first, uint64_t last);
  void UnlockGrains(uint64_t first, uint64_t last);
  void RetryLocked(Ctx* ctx, std::vector<IoRequest*>& out);
  void StartWrite(IoRequest* parent, std::vector<IoRequest*>& out) override;
  void RunWrite(Piece* p, std::vector<IoRequest*>& out);
  void IssueWrite(Piece* p, std::vector<IoRequest*>& out);
  void FinishPiece(Piece* p, std::error_code status);
  void FinishCtx(Ctx* ctx, std::error_code status);
  Piece* NewPiece(Ctx* ctx, uint64_t first_grain, uint64_t grains, uint64_t iov_off);
  static void OnReadDone(IoRequest& r);
  static void OnWriteIo(IoRequest& r);
  void Retry(Waiter* w, std::vector<IoRequest*>& out) override {
    if (w->kind == kLockedRead) return RetryLocked(static_cast<Ctx*>(w), out);
    RunWrite(static_cast<Piece*>(w), out);
  }

  // Partial grains use pooled buffers; runs of whole grains own a bounce buffer (`owned`).
  void PutBuffer(AlignedBuffer*& b, bool owned) {
    if (owned) {
      delete b;
      b = nullptr;
    }
    buffers_.Put(b);
  }

  Crc32cDevice& dev_;
  ChecksumTable& table_;
  RequestPool<Ctx> ctxs_;
  RequestPool<Piece> pieces_;
};

Crc32cQueue::Piece* Crc32cQueue::NewPiece(Ctx* ctx, uint64_t first_grain, uint64_t grains,
                                          uint64_t iov_off) {
  Piece* p = pieces_.Get();
  *p = Piece{};
  p->q = this;
  p->ctx = ctx;
  p->first_grain = first_grain;
  p->grains = grains;
  p->iov_off = iov_off;
  return p;
}

// Calls fn(first_grain, grains, iov_off, partial, in_off, len) for each piece of a request:
// a partial grain at the start, the whole grains, a partial grain at the end.
template <typename Fn>
void ForEachPiece(uint64_t offset, uint64_t length, uint32_t grain, Fn fn) {
  uint64_t pos = offset;
  const uint64_t end = offset + length;
  while (pos < end) {
    const uint64_t g = pos / grain;
    const uint32_t in_off = static_cast<uint32_t>(pos % grain);
    if (in_off != 0 || end - pos < grain) {
      const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(grain - in_off, end - pos));
      fn(g, 1, pos - offset, true, in_off, len);
      pos += len;
      continue;
    }
    const uint64_t whole = (end - pos) / grain;
    fn(g, whole, pos - offset, false, 0u, 0u);
    pos += whole * grain;
  }
}

// ---------------------------------------------------------------------------------------------
// Reads

void Crc32cQueue::StartRead(IoRequest* parent, std::vector<IoRequest*>& out) {
  Ctx* ctx = ctxs_.Get();
  *ctx = Ctx{};
  ctx->kind = kLockedRead;
  ctx->is_read = true;
  ctx->first_grain = parent->offset / grain_;
  ctx->last_grain = (parent->offset + parent->length - 1) / grain_;
  ForEachPiece(parent->offset, parent->length, grain_,
               [&](uint64_t g, uint64_t n, uint64_t iov_off, bool partial, uint32_t in_off,
                   uint32_t len) {
                 Piece* p = NewPiece(ctx, g, n, iov_off);
                 p->partial = partial;
                 p->in_off = in_off;
                 p->len = len;
                 ctx->pieces.push_back(p);
               });
  ctx->done.Start(parent, static_cast<uint32_t>(ctx->pieces.size()));
  for (Piece* p : ctx->pieces) IssueRead(p, out);
}

void Crc32cQueue::IssueRead(Piece* p, std::vector<IoRequest*>& out) {
  IoRequest* parent = p->ctx->done.parent();
  const uint64_t bytes = p->grains * grain_;
  p->iov.clear();
  if (p->partial) {
    if (!p->buf) p->buf = GetBuffer();
    p->iov.push_back(iovec{p->buf->data(), grain_});
  } else if (p->buf || !SliceAligned(parent->iov, parent->iovcnt, p->iov_off, bytes, lower_align_)) {
    if (!p->buf) p->buf = new AlignedBuffer(bytes, align_);
    p->iov.push_back(p->buf->iov());
  } else {
    IovSlice(parent->iov, parent->iovcnt, p->iov_off, bytes, &p->iov);
  }
  p->lower = IoRequest{};
  p->lower.op = Op::kRead;
  p->lower.offset = GrainOffset(p->first_grain);
  p->lower.length = bytes;
  p->lower.iov = p->iov.data();
  p->lower.iovcnt = static_cast<uint32_t>(p->iov.size());
  p->lower.on_complete = &Crc32cQueue::OnReadDone;
  p->lower.user_data = p;
  out.push_back(&p->lower);
}

void Crc32cQueue::OnReadDone(IoRequest& r) {
  Piece* p = static_cast<Piece*>(r.user_data);
  Ctx* ctx = p->ctx;
  if (ctx->done.Done(r.status)) p->q->VerifyRead(ctx);
}

void Crc32cQueue::VerifyRead(Ctx* ctx) {
  IoRequest* parent = ctx->done.parent();
  uint64_t bad_offset = UINT64_MAX;
  if (!ctx->done.error()) {
    for (Piece* p : ctx->pieces) {
      for (uint64_t i = 0; i < p->grains && bad_offset == UINT64_MAX; ++i) {
        const uint64_t g = p->first_grain + i;
        const uint32_t crc =
            p->buf ? Crc32c(p->buf->data() + i * grain_, grain_)
                   : Crc32cIov(parent->iov, parent->iovcnt, p->iov_off + i * grain_, grain_);
        if (!table_.Matches(g, crc)) bad_offset = g * grain_;
      }
    }
    if (bad_offset != UINT64_MAX && !ctx->locked) {
      // A write may have overlapped the read: read again with the writers held off.
      Count(Crc32cDevice::kReadRetries);
      ctx->locked = true;
      std::vector<IoRequest*> out;
      RetryLocked(ctx, out);
      SubmitLower(out);
      return;
    }
  }
  if (ctx->locked) UnlockGrains(ctx->first_grain, ctx->last_grain);
  std::error_code status = ctx->done.error();
  if (!status && bad_offset != UINT64_MAX) {
    dev_.RecordMismatch(bad_offset);
    status = Errc::kChecksumMismatch;
  }
  for (Piece* p : ctx->pieces) {
    if (!status && p->buf) {
      const uint64_t skip = p->partial ? p->in_off : 0;
      const uint64_t n = p->partial ? p->len : p->grains * grain_;
      CopyToIov(parent->iov, parent->iovcnt, p->iov_off, p->buf->data() + skip, n);
    }
    PutBuffer(p->buf, !p->partial);
    pieces_.Put(p);
  }
  if (status) ZeroIov(parent->iov, parent->iovcnt, 0, parent->length);  // no bad data goes up
  ctx->pieces.clear();
  ctxs_.Put(ctx);
  Complete(*parent, status);
}

bool Crc32cQueue::LockGrains(uint64_t first, uint64_t last) {
  for (uint64_t g = first; g <= last; ++g) {
    if (!table_.Lock(g)) {
      if (g > first) UnlockGrains(first, g - 1);
      return false;
    }
  }
  return true;
}

void Crc32cQueue::UnlockGrains(uint64_t first, uint64_t last) {
  for (uint64_t g = first; g <= last; ++g) table_.Unlock(g);
}

void Crc32cQueue::RetryLocked(Ctx* ctx, std::vector<IoRequest*>& out) {
  if (!LockGrains(ctx->first_grain, ctx->last_grain)) return Park(ctx);
  ctx->done.Start(ctx->done.parent(), static_cast<uint32_t>(ctx->pieces.size()));
  for (Piece* p : ctx->pieces) IssueRead(p, out);
}

// ---------------------------------------------------------------------------------------------
// Writes

void Crc32cQueue::StartWrite(IoRequest* parent, std::vector<IoRequest*>& out) {
  if (RejectSlowFastZero(parent)) return;  // zeroing part of a grain is a RMW
  const uint64_t first = parent->offset / grain_;
  const uint64_t last = (parent->offset + parent->length - 1) / grain_;
  std::vector<uint64_t> to_mark;
  table_.TouchRegions(first, last, &to_mark);
  if (!to_mark.empty()) {
    QuiesceBelow();  // marking blocks (GrainQueue)
    Status s = dev_.MarkDirty(to_mark);
    if (!s) {
      table_.UntouchRegions(first, last);
      Complete(*parent, s.error().code);
      return;
    }
  }
  Ctx* ctx = ctxs_.Get();
  *ctx = Ctx{};
  ctx->done.Start(parent, 1);  // 1: held while the pieces are started
  ctx->first_grain = first;
  ctx->last_grain = last;
  ForEachPiece(parent->offset, parent->length, grain_,
               [&](uint64_t g, uint64_t n, uint64_t iov_off, bool partial, uint32_t in_off,
                   uint32_t len) {
                 Piece* p = NewPiece(ctx, g, n, iov_off);
                 p->partial = partial;
                 p->in_off = in_off;
                 p->len = len;
                 ctx->done.Add();
                 RunWrite(p, out);
               });
  FinishCtx(ctx, {});
}

// Locks the piece's grains (or parks it), then reads (partial) or writes (whole grains).
void Crc32cQueue::RunWrite(Piece* p, std::vector<IoRequest*>& out) {
  if (!LockGrains(p->first_grain, p->first_grain + p->grains - 1)) return Park(p);
  if (!p->partial) return IssueWrite(p, out);
  // Read-modify-write: read the whole grain first.
  Count(Crc32cDevice::kRmwReads);
  p->rmw_read = true;
  p->buf = GetBuffer();
  p->iov.assign(1, iovec{p->buf->data(), grain_});
  p->lower = IoRequest{};
  p->lower.op = Op::kRead;
  p->lower.offset = GrainOffset(p->first_grain);
  p->lower.length = grain_;
  p->lower.iov = p->iov.data();
  p->lower.iovcnt = 1;
  p->lower.on_complete = &Crc32cQueue::OnWriteIo;
  p->lower.user_data = p;
  out.push_back(&p->lower);
}

// The grains are locked (and, if partial, merged in p->buf): checksum, register, write.
void Crc32cQueue::IssueWrite(Piece* p, std::vector<IoRequest*>& out) {
  IoRequest* parent = p->ctx->done.parent();
  const bool zeroes = parent->op != Op::kWrite;
  const uint64_t bytes = p->grains * grain_;
  p->crcs.clear();
  p->iov.clear();
  p->lower = IoRequest{};
  p->lower.offset = GrainOffset(p->first_grain);
  p->lower.length = bytes;
  p->lower.on_complete = &Crc32cQueue::OnWriteIo;
  p->lower.user_data = p;
  if (p->partial) {
    p->crcs.push_back(Crc32c(p->buf->data(), grain_));
    p->iov.push_back(iovec{p->buf->data(), grain_});
    p->lower.op = Op::kWrite;
    p->lower.flags = parent->flags & kIoFua;
  } else if (zeroes) {
    p->crcs.assign(p->grains, table_.zero_crc());
    p->lower.op = Op::kWriteZeroes;
    p->lower.flags = parent->flags & (kIoFua | kIoFastZero | kIoMayUnmap);
    if (parent->op == Op::kDiscard) p->lower.flags |= kIoMayUnmap;
  } else {
    for (uint64_t i = 0; i < p->grains; ++i) {
      p->crcs.push_back(Crc32cIov(parent->iov, parent->iovcnt, p->iov_off + i * grain_, grain_));
    }
    if (SliceAligned(parent->iov, parent->iovcnt, p->iov_off, bytes, lower_align_)) {
      IovSlice(parent->iov, parent->iovcnt, p->iov_off, bytes, &p->iov);
    } else {
      p->buf = new AlignedBuffer(bytes, align_);
      CopyFromIov(parent->iov, parent->iovcnt, p->iov_off, p->buf->data(), bytes);
      p->iov.push_back(p->buf->iov());
    }
    p->lower.op = Op::kWrite;
    p->lower.flags = parent->flags & kIoFua;
  }
  for (uint64_t i = 0; i < p->grains; ++i) table_.AddPending(p->first_grain + i, p->crcs[i]);
  p->lower.iov = p->iov.data();
  p->lower.iovcnt = static_cast<uint32_t>(p->iov.size());
  out.push_back(&p->lower);
}

void Crc32cQueue::OnWriteIo(IoRequest& r) {
  Piece* p = static_cast<Piece*>(r.user_data);
  Crc32cQueue* q = p->q;
  if (p->rmw_read) {
    p->rmw_read = false;
    const uint64_t g = p->first_grain;
    std::error_code status = r.status;
    if (!status && !q->table_.Matches(g, Crc32c(p->buf->data(), q->grain_))) {
      // Merging into a corrupt grain would give the damage a valid checksum: refuse.
      q->dev_.RecordMismatch(g * q->grain_);
      status = Errc::kChecksumMismatch;
    }
    if (status) {
      q->table_.Unlock(g);
      return q->FinishPiece(p, status);
    }
    IoRequest* parent = p->ctx->done.parent();
    std::byte* at = p->buf->data() + p->in_off;
    if (parent->op == Op::kWrite) {
      CopyFromIov(parent->iov, parent->iovcnt, p->iov_off, at, p->len);
    } else {
      std::memset(at, 0, p->len);
    }
    std::vector<IoRequest*> out;
    q->IssueWrite(p, out);
    q->SubmitLower(out);
    return;
  }
  for (uint64_t i = 0; i < p->grains; ++i) {
    q->table_.Finish(p->first_grain + i, p->crcs[i], !r.status);
    q->table_.Unlock(p->first_grain + i);
  }
  q->FinishPiece(p, r.status);
}

void Crc32cQueue::FinishPiece(Piece* p, std::error_code status) {
  Ctx* ctx = p->ctx;
  PutBuffer(p->buf, !p->partial);
  pieces_.Put(p);
  FinishCtx(ctx, status);
}

void Crc32cQueue::FinishCtx(Ctx* ctx, std::error_code status) {
  if (!ctx->done.Done(status)) return;
  table_.UntouchRegions(ctx->first_grain, ctx->last_grain);
  IoRequest* parent = ctx->done.parent();
  const std::error_code error = ctx->done.error();
  ctxs_.Put(ctx);
  Complete(*parent, error);
}

}  // namespace

std::unique_ptr<IoQueue> NewCrc32cQueue(Crc32cDevice& device, std::unique_ptr<IoQueue> lower) {
  return std::make_unique<Crc32cQueue>(device, std::move(lower));
}

}  // namespace vstack
