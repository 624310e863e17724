// The zstd data path. A grain operation is a small state machine:
//
//   write, whole grain:   lock -> zero test -> compress (this thread) -> stored-size rule ->
//                         raw: write a bin of its own | compressed: pack into the open bin
//   write, partial grain: lock + read the old grain and decompress it -> merge -> as above
//   write-zeroes/discard: whole grains are remapped to zero; partial grains merge zeros
//   read:                 look up (pinning) -> raw grains: one lower read per run of
//                         consecutive bins | fragments: read, decompress into the caller's buffer
//
// The open bin: fragments are appended to an in-memory image of the bin and written with the
// lower blocks that hold them; while one write of the bin is in flight, newly placed fragments
// wait and go down together in the next one (so two writes never overlap a shared block).
// An operation that finds its grain locked by another write parks; DoPoll retries it.
#include <cassert>
#include <cstring>

#include "blockdev/metastore/grain_io.h"
#include "blockdev/metastore/grain_queue.h"
#include "blockdev/zstd/grain_codec.h"
#include "blockdev/zstd/zstd_device.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"

namespace vstack {
namespace {

using Fragment = ZstdEngine::Fragment;

class ZstdQueue final : public GrainQueue {
 public:
  ZstdQueue(ZstdDevice& dev, std::unique_ptr<IoQueue> lower)
      : GrainQueue(dev, std::move(lower)),
        dev_(dev),
        eng_(dev.engine()),
        grain_(dev.grain()),
        align_(std::max<uint64_t>(4096, dev.lower_device().geometry().mem_alignment)),
        lower_align_(dev.lower_device().geometry().mem_alignment),
        lower_block_(dev.lower_device().geometry().logical_block),
        compressor_(dev.level()),
        buffers_(grain_, align_) {}

  ~ZstdQueue() override {
    if (open_) CloseBin(open_);
  }

 protected:
  void BeforeBatch() override;
  Status CommitForFlush() override { return dev_.Commit(); }
  void DoPoll(bool wait) override;

 private:
  struct Ctx {
    IoRequest* parent = nullptr;
    uint32_t pending = 0;
    std::error_code error;
  };

  struct Bin;
  enum class Step { kStart, kRmwRead, kStore, kRawWrite, kPacked };

  // One grain of a write, write-zeroes or discard.
  struct GrainOp {
    ZstdQueue* q = nullptr;
    Ctx* ctx = nullptr;
    Op op = Op::kWrite;   // kWrite or kWriteZeroes (discards too)
    bool unmap = false;
    uint64_t v = 0;
    uint32_t in_off = 0, len = 0;
    uint64_t iov_off = 0;  // where the grain's bytes are in the caller's iovecs
    Step step = Step::kStart;
    bool locked = false;
    bool commit_tried = false;
    AlignedBuffer* buf = nullptr;   // the grain's new content, when not the caller's buffer
    AlignedBuffer* cbuf = nullptr;  // compressed bytes, or the old grain's stored bytes
    uint64_t old = 0;               // RMW: the entry read
    uint32_t clen = 0;              // compressed length (0: raw)
    uint32_t slot = 0;
    uint32_t bin = 0;
    uint64_t entry = 0;             // the new map entry once written
    IoRequest lower;
    std::vector<iovec> iov;
  };

  // A bin this queue packs fragments into (open), or a closed one with a write in flight.
  struct Bin {
    ZstdQueue* q = nullptr;
    uint32_t bin = 0;
    uint32_t fill = 0;
    bool closed = false;
    bool writing = false;
    AlignedBuffer image;
    AlignedBuffer wbuf;
    std::vector<GrainOp*> waiting;   // placed, not yet written
    std::vector<GrainOp*> in_write;  // covered by the write in flight
    IoRequest lower;
    iovec iov{};
  };

  // One lower read: a run of consecutive raw bins, or one compressed fragment.
  struct ReadOp {
    ZstdQueue* q = nullptr;
    Ctx* ctx = nullptr;
    uint32_t first_bin = 0;
    uint32_t bins = 0;
    uint64_t iov_off = 0;       // where the bytes go in the caller's iovecs
    uint64_t length = 0;        // bytes for the caller
    bool fragment = false;
    Fragment frag;              // fragment: where it is
    uint32_t lo = 0;            // fragment: the lower read starts at this offset of the bin
    uint32_t in_off = 0;        // fragment: first byte of the grain the caller wants
    AlignedBuffer* buf = nullptr;  // fragment: stored bytes; raw run: bounce buffer
    IoRequest lower;
    std::vector<iovec> iov;
  };

  const iovec* piov(const GrainOp* op) const { return op->ctx->parent->iov; }
  uint32_t piovcnt(const GrainOp* op) const { return op->ctx->parent->iovcnt; }
  uint64_t BinOffset(uint32_t bin) const { return dev_.data_offset() + uint64_t{bin} * grain_; }
  uint32_t AlignDown(uint32_t v) const { return v / lower_block_ * lower_block_; }
  uint32_t AlignUp(uint32_t v) const { return (v + lower_block_ - 1) / lower_block_ * lower_block_; }

  void StartWrite(IoRequest* parent, std::vector<IoRequest*>& out) override;
  void StartRead(IoRequest* parent, std::vector<IoRequest*>& out) override;
  void Run(GrainOp* op, std::vector<IoRequest*>& out);
  void Store(GrainOp* op, std::vector<IoRequest*>& out);
  void Merge(GrainOp* op, std::vector<IoRequest*>& out);
  void NoSpace(GrainOp* op);
  void Pack(GrainOp* op, std::vector<IoRequest*>& out);
  void WriteBin(Bin* b, std::vector<IoRequest*>& out);
  void CloseBin(Bin* b);
  void Finish(GrainOp* op, std::error_code status);
  void FinishCtx(Ctx* ctx, std::error_code status);
  void Park(GrainOp* op) { parked_.push_back(op); }
  static void OnGrainIo(IoRequest& r);
  static void OnBinWritten(IoRequest& r);
  static void OnRead(IoRequest& r);

  AlignedBuffer* GetBuffer() { return buffers_.Get(); }
  void PutBuffer(AlignedBuffer*& b) { buffers_.Put(b); }

  ZstdDevice& dev_;
  ZstdEngine& eng_;
  const uint32_t grain_;
  const uint64_t align_;
  const uint64_t lower_align_;
  const uint32_t lower_block_;
  GrainCompressor compressor_;
  GrainDecompressor decompressor_;
  RequestPool<Ctx> ctxs_;
  RequestPool<GrainOp> ops_;
  RequestPool<ReadOp> reads_;
  RequestPool<Bin> bins_;
  Bin* open_ = nullptr;
  BufferPool buffers_;
  std::vector<GrainOp*> parked_;
  bool need_commit_ = false;
};

void ZstdQueue::BeforeBatch() {
  if (eng_.pending_bytes() > dev_.commit_threshold()) (void)dev_.Commit();
}

void ZstdQueue::DoPoll(bool wait) {
  if (need_commit_) {
    need_commit_ = false;
    (void)dev_.Commit();  // frees bins released before it; failures surface as kNoSpace
  }
  if (!parked_.empty()) {
    std::vector<GrainOp*> retry;
    retry.swap(parked_);
    std::vector<IoRequest*> out;
    for (GrainOp* op : retry) {
      Count(ZstdDevice::kRetries);
      Run(op, out);
    }
    SubmitLower(out);
  }
  LayerQueue::DoPoll(wait);
}

void ZstdQueue::StartWrite(IoRequest* parent, std::vector<IoRequest*>& out) {
  if (RejectSlowFastZero(parent, grain_)) return;  // zeroing part of a grain is a RMW
  Ctx* ctx = ctxs_.Get();
  *ctx = Ctx{parent, 1, {}};
  const bool unmap = parent->op == Op::kDiscard ||
                     (parent->op == Op::kWriteZeroes && (parent->flags & kIoMayUnmap));
  for (uint64_t pos = parent->offset; pos < parent->offset + parent->length;) {
    const uint32_t in_off = static_cast<uint32_t>(pos % grain_);
    const uint32_t len = static_cast<uint32_t>(
        std::min<uint64_t>(grain_ - in_off, parent->offset + parent->length - pos));
    GrainOp* op = ops_.Get();
    *op = GrainOp{};
    op->q = this;
    op->ctx = ctx;
    op->op = parent->op == Op::kWrite ? Op::kWrite : Op::kWriteZeroes;
    op->unmap = unmap;
    op->v = pos / grain_;
    op->in_off = in_off;
    op->len = len;
    op->iov_off = pos - parent->offset;
    ++ctx->pending;
    Run(op, out);
    pos += len;
  }
  FinishCtx(ctx, {});
}

void ZstdQueue::Run(GrainOp* op, std::vector<IoRequest*>& out) {
  if (op->step == Step::kStore) return Store(op, out);  // a retry after kNoSpace's commit
  assert(op->step == Step::kStart);
  if (op->len < grain_) {
    // Read-modify-write: the old grain first.
    if (!eng_.LockForRmw(op->v, &op->old)) return Park(op);
    op->locked = true;
    op->buf = GetBuffer();
    if (!ZstdEngine::IsFragment(op->old)) {
      std::memset(op->buf->data(), 0, grain_);
      return Merge(op, out);
    }
    Count(ZstdDevice::kRmwReads);
    const Fragment f = ZstdEngine::Decode(op->old);
    op->step = Step::kRmwRead;
    op->iov.clear();
    op->lower = IoRequest{};
    op->lower.op = Op::kRead;
    if (f.raw()) {
      op->iov.push_back(iovec{op->buf->data(), grain_});
      op->lower.offset = BinOffset(f.bin);
      op->lower.length = grain_;
    } else {
      op->cbuf = GetBuffer();
      const uint32_t lo = AlignDown(f.offset), hi = AlignUp(f.offset + f.length);
      op->iov.push_back(iovec{op->cbuf->data(), hi - lo});
      op->lower.offset = BinOffset(f.bin) + lo;
      op->lower.length = hi - lo;
    }
    op->lower.iov = op->iov.data();
    op->lower.iovcnt = 1;
    op->lower.on_complete = &ZstdQueue::OnGrainIo;
    op->lower.user_data = op;
    out.push_back(&op->lower);
    return;
  }
  if (!eng_.Lock(op->v)) return Park(op);
  op->locked = true;
  if (op->op == Op::kWriteZeroes) {
    eng_.Remap(op->v, op->unmap ? ZstdEngine::kUnmapped : ZstdEngine::kZero);
    op->locked = false;
    Count(ZstdDevice::kZeroGrains);
    return Finish(op, {});
  }
  Store(op, out);
}

void ZstdQueue::Merge(GrainOp* op, std::vector<IoRequest*>& out) {
  std::byte* b = op->buf->data();
  if (op->op == Op::kWrite) {
    CopyFromIov(piov(op), piovcnt(op), op->iov_off, b + op->in_off, op->len);
  } else {
    std::memset(b + op->in_off, 0, op->len);
  }
  Store(op, out);
}

// The grain's new content is in op->buf, or in the caller's buffer (whole-grain writes); the
// grain is locked. Eliminates zeros, compresses, applies the rule, and writes.
void ZstdQueue::Store(GrainOp* op, std::vector<IoRequest*>& out) {
  op->step = Step::kStore;
  const char* src = op->buf ? reinterpret_cast<const char*>(op->buf->data())
                            : ContiguousSlice(piov(op), piovcnt(op), op->iov_off, grain_);
  if (src == nullptr) {
    op->buf = GetBuffer();  // the caller's grain spans several buffers: gather it
    CopyFromIov(piov(op), piovcnt(op), op->iov_off, op->buf->data(), grain_);
    src = reinterpret_cast<const char*>(op->buf->data());
  }
  if (op->cbuf == nullptr) op->cbuf = GetBuffer();
  const EncodedGrain e = EncodeGrain(compressor_, dev_.rule(), src, grain_, op->cbuf->data());
  if (e.zero) {
    eng_.Remap(op->v, ZstdEngine::kZero);
    op->locked = false;
    Count(ZstdDevice::kZeroGrains);
    return Finish(op, {});
  }
  op->clen = e.compressed;
  if (e.form.compressed) {
    Count(ZstdDevice::kCompressed);
    op->slot = e.form.slot;
    return Pack(op, out);
  }
  // Raw, in a bin of its own.
  Count(ZstdDevice::kStoredRaw);
  std::optional<uint32_t> bin = eng_.AllocateBin(false);
  if (!bin) return NoSpace(op);
  op->bin = *bin;
  op->clen = 0;
  op->step = Step::kRawWrite;
  op->iov.clear();
  if (op->buf == nullptr && !SliceAligned(piov(op), piovcnt(op), op->iov_off, grain_, lower_align_)) {
    op->buf = GetBuffer();
    CopyFromIov(piov(op), piovcnt(op), op->iov_off, op->buf->data(), grain_);
  }
  if (op->buf) {
    op->iov.push_back(iovec{op->buf->data(), grain_});
  } else {
    IovSlice(piov(op), piovcnt(op), op->iov_off, grain_, &op->iov);
  }
  op->lower = IoRequest{};
  op->lower.op = Op::kWrite;
  op->lower.offset = BinOffset(op->bin);
  op->lower.length = grain_;
  op->lower.iov = op->iov.data();
  op->lower.iovcnt = static_cast<uint32_t>(op->iov.size());
  op->lower.on_complete = &ZstdQueue::OnGrainIo;
  op->lower.user_data = op;
  out.push_back(&op->lower);
}

void ZstdQueue::NoSpace(GrainOp* op) {
  if (!op->commit_tried && eng_.pending_frees() > 0) {
    // Bins released since the last commit become free once it is durable: commit, retry.
    op->commit_tried = true;
    need_commit_ = true;
    return Park(op);  // still locked, in step kStore
  }
  eng_.Unlock(op->v);
  op->locked = false;
  Finish(op, Errc::kNoSpace);
}

void ZstdQueue::Pack(GrainOp* op, std::vector<IoRequest*>& out) {
  if (open_ && open_->fill + op->slot > grain_) {
    CloseBin(open_);
    open_ = nullptr;
  }
  if (!open_) {
    std::optional<uint32_t> bin = eng_.AllocateBin(true);
    if (!bin) return NoSpace(op);
    Bin* b = bins_.Get();
    b->q = this;
    b->bin = *bin;
    b->fill = 0;
    b->closed = b->writing = false;
    if (b->image.size() != grain_) {
      b->image = AlignedBuffer(grain_, align_);
      b->wbuf = AlignedBuffer(grain_, align_);
    }
    std::memset(b->image.data(), 0, grain_);
    open_ = b;
  }
  Bin* b = open_;
  std::byte* at = b->image.data() + b->fill;
  std::memcpy(at, op->cbuf->data(), op->clen);
  std::memset(at + op->clen, 0, op->slot - op->clen);
  op->entry = ZstdEngine::Encode(Fragment{b->bin, b->fill, op->clen});
  op->bin = b->bin;
  op->step = Step::kPacked;
  b->fill += op->slot;
  PutBuffer(op->cbuf);
  PutBuffer(op->buf);
  b->waiting.push_back(op);
  if (!b->writing) WriteBin(b, out);
}

// Writes the lower blocks of `b` that hold its waiting fragments, from a copy of the image.
void ZstdQueue::WriteBin(Bin* b, std::vector<IoRequest*>& out) {
  const Fragment first = ZstdEngine::Decode(b->waiting.front()->entry);
  const Fragment last = ZstdEngine::Decode(b->waiting.back()->entry);
  const uint32_t lo = AlignDown(first.offset);
  const uint32_t hi = AlignUp(last.offset + last.length);
  std::memcpy(b->wbuf.data(), b->image.data() + lo, hi - lo);
  b->in_write.swap(b->waiting);
  b->waiting.clear();
  b->writing = true;
  b->iov = iovec{b->wbuf.data(), hi - lo};
  b->lower = IoRequest{};
  b->lower.op = Op::kWrite;
  b->lower.offset = BinOffset(b->bin) + lo;
  b->lower.length = hi - lo;
  b->lower.iov = &b->iov;
  b->lower.iovcnt = 1;
  b->lower.on_complete = &ZstdQueue::OnBinWritten;
  b->lower.user_data = b;
  out.push_back(&b->lower);
}

void ZstdQueue::CloseBin(Bin* b) {
  b->closed = true;
  if (b->writing || !b->waiting.empty()) return;  // OnBinWritten closes it
  eng_.CloseBin(b->bin);
  bins_.Put(b);
}

void ZstdQueue::OnBinWritten(IoRequest& r) {
  Bin* b = static_cast<Bin*>(r.user_data);
  ZstdQueue* q = b->q;
  std::vector<GrainOp*> done;
  done.swap(b->in_write);
  b->writing = false;
  for (GrainOp* op : done) {
    if (r.status) {
      q->eng_.Unlock(op->v);  // the fragment's space in the bin stays unused
    } else {
      q->eng_.Remap(op->v, op->entry);
    }
    op->locked = false;
    q->Finish(op, r.status);
  }
  std::vector<IoRequest*> out;
  if (!b->waiting.empty()) {
    q->WriteBin(b, out);
  } else if (b->closed) {
    q->eng_.CloseBin(b->bin);
    q->bins_.Put(b);
  }
  q->SubmitLower(out);
}

void ZstdQueue::OnGrainIo(IoRequest& r) {
  GrainOp* op = static_cast<GrainOp*>(r.user_data);
  ZstdQueue* q = op->q;
  std::vector<IoRequest*> out;
  if (op->step == Step::kRawWrite) {
    if (r.status) {
      q->eng_.FreeUnusedBin(op->bin);
      q->eng_.Unlock(op->v);
    } else {
      q->eng_.Remap(op->v, ZstdEngine::Encode(Fragment{op->bin, 0, 0}));
    }
    op->locked = false;
    q->Finish(op, r.status);
    return;
  }
  assert(op->step == Step::kRmwRead);
  const Fragment f = ZstdEngine::Decode(op->old);
  q->eng_.Unpin(f.bin);
  std::error_code status = r.status;
  if (!status && !f.raw()) {
    const char* stored = reinterpret_cast<const char*>(op->cbuf->data()) + (f.offset - q->AlignDown(f.offset));
    if (!q->decompressor_.Decompress(stored, f.length, op->buf->data(), q->grain_)) {
      q->Count(ZstdDevice::kDecompressErrors);
      status = Errc::kCorruption;
    }
  }
  if (status) {
    q->eng_.Unlock(op->v);
    op->locked = false;
    q->Finish(op, status);
    return;
  }
  q->Merge(op, out);
  q->SubmitLower(out);
}

void ZstdQueue::Finish(GrainOp* op, std::error_code status) {
  Ctx* ctx = op->ctx;
  PutBuffer(op->buf);
  PutBuffer(op->cbuf);
  ops_.Put(op);
  FinishCtx(ctx, status);
}

void ZstdQueue::FinishCtx(Ctx* ctx, std::error_code status) {
  if (status && !ctx->error) ctx->error = status;
  if (--ctx->pending > 0) return;
  IoRequest* parent = ctx->parent;
  const std::error_code error = ctx->error;
  ctxs_.Put(ctx);
  Complete(*parent, error);
}

// ---------------------------------------------------------------------------------------------
// Reads

void ZstdQueue::StartRead(IoRequest* parent, std::vector<IoRequest*>& out) {
  Ctx* ctx = ctxs_.Get();
  *ctx = Ctx{parent, 1, {}};
  const uint64_t first = parent->offset / grain_;
  const uint64_t last = (parent->offset + parent->length - 1) / grain_;
  std::vector<uint64_t> entries;
  eng_.LookupForRead(first, last - first + 1, &entries);
  ReadOp* run = nullptr;  // the current run of raw bins
  uint64_t run_end = 0;   // lower byte offset where it ends
  auto issue = [&](ReadOp* r) {
    r->lower.iov = r->iov.data();
    r->lower.iovcnt = static_cast<uint32_t>(r->iov.size());
    ++ctx->pending;
    out.push_back(&r->lower);
  };
  auto close_run = [&] {
    if (run == nullptr) return;
    run->lower.length = run->length;
    if (SliceAligned(parent->iov, parent->iovcnt, run->iov_off, run->length, lower_align_)) {
      IovSlice(parent->iov, parent->iovcnt, run->iov_off, run->length, &run->iov);
    } else {
      run->buf = new AlignedBuffer(run->length, align_);
      run->iov.push_back(run->buf->iov());
    }
    issue(run);
    run = nullptr;
  };
  auto new_read = [&](uint64_t iov_off) {
    ReadOp* r = reads_.Get();
    *r = ReadOp{};
    r->q = this;
    r->ctx = ctx;
    r->iov_off = iov_off;
    r->lower.op = Op::kRead;
    r->lower.on_complete = &ZstdQueue::OnRead;
    r->lower.user_data = r;
    return r;
  };
  for (uint64_t pos = parent->offset; pos < parent->offset + parent->length;) {
    const uint64_t v = pos / grain_;
    const uint32_t in_off = static_cast<uint32_t>(pos % grain_);
    const uint32_t len = static_cast<uint32_t>(
        std::min<uint64_t>(grain_ - in_off, parent->offset + parent->length - pos));
    const uint64_t e = entries[v - first];
    if (!ZstdEngine::IsFragment(e)) {
      close_run();
      ZeroIov(parent->iov, parent->iovcnt, pos - parent->offset, len);
    } else if (const Fragment f = ZstdEngine::Decode(e); f.raw()) {
      const uint64_t phys = BinOffset(f.bin) + in_off;
      if (run && run_end == phys && f.bin == run->first_bin + run->bins) {
        ++run->bins;
      } else {
        close_run();
        run = new_read(pos - parent->offset);
        run->first_bin = f.bin;
        run->bins = 1;
        run->lower.offset = phys;
      }
      run->length += len;
      run_end = phys + len;
    } else {
      close_run();
      ReadOp* r = new_read(pos - parent->offset);
      r->fragment = true;
      r->frag = f;
      r->first_bin = f.bin;
      r->bins = 1;
      r->in_off = in_off;
      r->length = len;
      r->lo = AlignDown(f.offset);
      const uint32_t hi = AlignUp(f.offset + f.length);
      r->buf = GetBuffer();
      r->iov.push_back(iovec{r->buf->data(), hi - r->lo});
      r->lower.offset = BinOffset(f.bin) + r->lo;
      r->lower.length = hi - r->lo;
      issue(r);
    }
    pos += len;
  }
  close_run();
  FinishCtx(ctx, {});
}

void ZstdQueue::OnRead(IoRequest& req) {
  ReadOp* r = static_cast<ReadOp*>(req.user_data);
  ZstdQueue* q = r->q;
  IoRequest* parent = r->ctx->parent;
  std::error_code status = req.status;
  if (r->fragment) {
    q->eng_.Unpin(r->first_bin);
    if (!status) {
      const char* stored = reinterpret_cast<const char*>(r->buf->data()) + (r->frag.offset - r->lo);
      // Whole grain into one piece of the caller's buffer: decompress in place.
      char* dst = r->length == q->grain_
                      ? ContiguousSlice(parent->iov, parent->iovcnt, r->iov_off, q->grain_)
                      : nullptr;
      AlignedBuffer* scratch = dst ? nullptr : q->GetBuffer();
      if (!q->decompressor_.Decompress(stored, r->frag.length,
                                       dst ? dst : reinterpret_cast<char*>(scratch->data()),
                                       q->grain_)) {
        q->Count(ZstdDevice::kDecompressErrors);
        status = Errc::kCorruption;
      } else if (scratch) {
        CopyToIov(parent->iov, parent->iovcnt, r->iov_off, scratch->data() + r->in_off, r->length);
      }
      q->PutBuffer(scratch);
    }
    q->PutBuffer(r->buf);
  } else {
    for (uint32_t i = 0; i < r->bins; ++i) q->eng_.Unpin(r->first_bin + i);
    if (r->buf) {
      if (!status) CopyToIov(parent->iov, parent->iovcnt, r->iov_off, r->buf->data(), r->length);
      delete r->buf;
      r->buf = nullptr;
    }
  }
  Ctx* ctx = r->ctx;
  q->reads_.Put(r);
  q->FinishCtx(ctx, status);
}

}  // namespace

std::unique_ptr<IoQueue> NewZstdQueue(ZstdDevice& device, std::unique_ptr<IoQueue> lower) {
  return std::make_unique<ZstdQueue>(device, std::move(lower));
}

}  // namespace vstack
