// The zstd data path. A grain operation is a small state machine:
//
//   write, whole grain:   lock -> zero test -> compress (this thread) -> stored-size rule ->
//                         raw: write a bin of its own | compressed: pack into an open bin
//   write, partial grain: lock + read the old grain and decompress it -> merge -> as above
//   write-zeroes/discard: whole grains are remapped to zero; partial grains merge zeros
//   read:                 look up (pinning) -> raw grains: one lower read per run of
//                         consecutive bins | fragments: read, decompress into the caller's buffer
//
// Packing (bin_packer.h): each fragment goes into the bin with free space that fits it most
// tightly: one of the queue's active bins (at most the device's `open_bins`, each with an
// in-memory image), or a hole (a bin retired from the active ones with room left, known by
// number and free bytes only), which is activated again: the lower block its free space starts
// in is read back first (tail read). A fragment is appended to the image of its bin and written
// with the lower blocks that hold it; while one write (or the tail read) of a bin is in flight,
// newly placed fragments wait and go down together in the next write (so two writes never
// overlap a shared block). Every fragment is written before its write completes, so whether its
// bin is still open does not matter to durability.
// An operation that finds its grain locked by another write parks; DoPoll retries it.
#include <cassert>
#include <cstring>

#include "blockdev/metastore/grain_io.h"
#include "blockdev/grainmap/grain_queue.h"
#include "blockdev/zstd/bin_packer.h"
#include "blockdev/zstd/grain_codec.h"
#include "blockdev/zstd/zstd_device.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"

namespace vstack {
namespace {

using Fragment = ZstdEngine::Fragment;

class ZstdQueue final : public MappedQueue<ZstdDevice> {
 public:
  ZstdQueue(ZstdDevice& dev, std::unique_ptr<IoQueue> lower)
      : MappedQueue(dev, std::move(lower), ZstdDevice::kRetries),
        lower_block_(dev.lower_device().geometry().logical_block),
        compressor_(dev.level()),
        packer_(grain_, dev.open_bins(), kMaxHoles, ApplySizeRule(dev.rule(), grain_, 1).slot) {}

  ~ZstdQueue() override {
    for (Bin* b : packer_.TakeActive()) Seal(b, grain_ - b->fill);
    for (const Hole& h : packer_.TakeHoles()) SealHole(h);
  }

 private:
  struct Bin;
  using Packer = BinPacker<Bin*>;
  using Hole = Packer::Hole;
  // Holes kept per queue: an index entry each (no image), about 48 bytes.
  static constexpr size_t kMaxHoles = 65536;
  enum class Step { kStart, kRmwRead, kStore, kRawWrite, kPacked };

  // One grain of a write, write-zeroes or discard.
  struct GrainOp : GrainWrite {
    ZstdQueue* q = nullptr;
    Step step = Step::kStart;
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

  // An active bin this queue packs fragments into, or one leaving (closed: sealed, or retired
  // to the holes) with a write in flight.
  struct Bin {
    ZstdQueue* q = nullptr;
    uint32_t bin = 0;
    uint32_t fill = 0;  // bytes placed (the packer decides where)
    bool closed = false;
    bool to_hole = false;   // closed: retire it to the holes rather than seal it
    bool writing = false;   // a write or the tail read is in flight
    uint32_t tail = 0;      // the tail read: the bytes [tail, tail_end) of the bin, the
    uint32_t tail_end = 0;  // fragments in the block its free space started in
    AlignedBuffer image;
    AlignedBuffer* wbuf = nullptr;   // the copy being written (or the tail being read)
    std::vector<GrainOp*> waiting;   // placed, not yet written
    std::vector<GrainOp*> in_write;  // covered by the write in flight
    IoRequest lower;
    iovec iov{};
  };

  // One lower read of a compressed fragment (raw bins are read in runs: ReadRun).
  struct FragmentRead {
    ZstdQueue* q = nullptr;
    PendingParent* ctx = nullptr;
    Fragment frag;              // where it is
    uint32_t lo = 0;            // the lower read starts at this offset of the bin
    uint32_t in_off = 0;        // first byte of the grain the caller wants
    uint64_t iov_off = 0;       // where the bytes go in the caller's iovecs
    uint64_t length = 0;        // bytes for the caller
    AlignedBuffer* buf = nullptr;  // the stored bytes
    IoRequest lower;
    iovec iov{};
  };

  const iovec* piov(const GrainOp* op) const { return op->piov(); }
  uint32_t piovcnt(const GrainOp* op) const { return op->piovcnt(); }
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
  // Makes `bin` (`fill` bytes used) active, retiring the fullest active bin if needed.
  Bin* Activate(uint32_t bin, uint32_t fill, std::vector<IoRequest*>& out);
  void WriteBin(Bin* b, std::vector<IoRequest*>& out);
  // After a bin's write or tail read: writes what waits, or lets a closed bin go.
  void Settle(Bin* b, std::vector<IoRequest*>& out);
  // Takes `b` out of packing for good (it left `free` bytes unused) and closes it.
  void Seal(Bin* b, uint32_t free);
  void SealHole(const Hole& h);
  // Takes `b` out of the active bins into the holes (once its writes are done).
  void Retire(Bin* b);
  void Finish(GrainOp* op, std::error_code status);
  void Retry(Waiter* w, std::vector<IoRequest*>& out) override {
    Run(static_cast<GrainOp*>(w), out);
  }
  void ReadFragment(PendingParent* ctx, const Fragment& f, uint32_t in_off, uint32_t len,
                    uint64_t iov_off, std::vector<IoRequest*>& out);
  static void OnGrainIo(IoRequest& r);
  static void OnBinWritten(IoRequest& r);
  static void OnTailRead(IoRequest& r);
  static void OnFragment(IoRequest& r);

  const uint32_t lower_block_;
  GrainCompressor compressor_;
  GrainDecompressor decompressor_;
  RequestPool<GrainOp> ops_;
  RequestPool<FragmentRead> fragments_;
  RequestPool<Bin> bins_;
  Packer packer_;
};

void ZstdQueue::StartWrite(IoRequest* parent, std::vector<IoRequest*>& out) {
  if (RejectSlowFastZero(parent)) return;  // zeroing part of a grain is a RMW
  CutWrite(parent, ops_, [&](GrainOp* op) {
    op->q = this;
    op->step = Step::kStart;
    op->buf = op->cbuf = nullptr;
    op->old = op->entry = 0;
    op->clen = op->slot = op->bin = 0;
    Run(op, out);
  });
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
  if (!op->commit_tried) {
    // Holes keep their bins open, even when every fragment in them died: give them up.
    for (const Hole& h : packer_.TakeHoles()) SealHole(h);
  }
  if (!op->commit_tried && eng_.pending_frees() > 0) {
    // Bins released since the last commit become free once it is durable: commit, retry.
    op->commit_tried = true;
    RequestCommit();
    return Park(op);  // still locked, in step kStore
  }
  eng_.Unlock(op->v);
  op->locked = false;
  Finish(op, Errc::kNoSpace);
}

void ZstdQueue::Pack(GrainOp* op, std::vector<IoRequest*>& out) {
  const Packer::Choice c = packer_.Choose(op->slot);
  Bin* b = c.active;
  if (c.kind == Packer::Choice::kHole) {
    b = Activate(c.hole.bin, grain_ - c.hole.free, out);
  } else if (c.kind == Packer::Choice::kNew) {
    std::optional<uint32_t> bin = eng_.AllocateBin(true);
    if (!bin) return NoSpace(op);
    b = Activate(*bin, 0, out);
  }
  bool full = false;
  const uint32_t offset = packer_.Place(b, op->slot, &full);
  std::byte* at = b->image.data() + offset;
  std::memcpy(at, op->cbuf->data(), op->clen);
  std::memset(at + op->clen, 0, op->slot - op->clen);
  op->entry = ZstdEngine::Encode(Fragment{b->bin, offset, op->clen});
  op->bin = b->bin;
  op->step = Step::kPacked;
  b->fill = offset + op->slot;
  PutBuffer(op->cbuf);
  PutBuffer(op->buf);
  b->waiting.push_back(op);
  if (!b->writing) WriteBin(b, out);
  if (full) Seal(b, grain_ - b->fill);
}

ZstdQueue::Bin* ZstdQueue::Activate(uint32_t bin, uint32_t fill, std::vector<IoRequest*>& out) {
  uint32_t free = 0;
  if (std::optional<Bin*> fullest = packer_.MakeRoom(&free)) Retire(*fullest);
  Bin* b = bins_.Get();
  b->q = this;
  b->bin = bin;
  b->fill = fill;
  b->closed = b->to_hole = b->writing = false;
  if (b->image.size() != grain_) b->image = AlignedBuffer(grain_, align_);
  std::memset(b->image.data(), 0, grain_);
  packer_.Activate(b, grain_ - fill);
  const uint32_t lo = AlignDown(fill);
  if (lo == fill) return b;
  // The lower block the free space starts in holds earlier fragments: its next write must
  // carry them again, so read it back first; fragments placed meanwhile wait.
  Count(ZstdDevice::kTailReads);
  b->writing = true;
  b->tail = lo;
  b->tail_end = fill;
  b->wbuf = GetBuffer();
  b->iov = iovec{b->wbuf->data(), lower_block_};
  b->lower = IoRequest{};
  b->lower.op = Op::kRead;
  b->lower.offset = BinOffset(bin) + lo;
  b->lower.length = lower_block_;
  b->lower.iov = &b->iov;
  b->lower.iovcnt = 1;
  b->lower.on_complete = &ZstdQueue::OnTailRead;
  b->lower.user_data = b;
  out.push_back(&b->lower);
  return b;
}

// Writes the lower blocks of `b` that hold its waiting fragments, from a copy of the image.
void ZstdQueue::WriteBin(Bin* b, std::vector<IoRequest*>& out) {
  const Fragment first = ZstdEngine::Decode(b->waiting.front()->entry);
  const Fragment last = ZstdEngine::Decode(b->waiting.back()->entry);
  const uint32_t lo = AlignDown(first.offset);
  const uint32_t hi = AlignUp(last.offset + last.length);
  b->wbuf = GetBuffer();
  std::memcpy(b->wbuf->data(), b->image.data() + lo, hi - lo);
  b->in_write.swap(b->waiting);
  b->waiting.clear();
  b->writing = true;
  b->iov = iovec{b->wbuf->data(), hi - lo};
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

void ZstdQueue::Seal(Bin* b, uint32_t free) {
  Count(ZstdDevice::kSealedBins);
  Count(ZstdDevice::kSealedFreeBytes, free);
  b->closed = true;
  std::vector<IoRequest*> none;
  if (!b->writing && b->waiting.empty()) Settle(b, none);  // else once its I/O is done
}

void ZstdQueue::SealHole(const Hole& h) {
  Count(ZstdDevice::kSealedBins);
  Count(ZstdDevice::kSealedFreeBytes, h.free);
  eng_.CloseBin(h.bin);
}

void ZstdQueue::Retire(Bin* b) {
  b->closed = b->to_hole = true;
  std::vector<IoRequest*> none;
  if (!b->writing && b->waiting.empty()) Settle(b, none);  // else once its I/O is done
}

void ZstdQueue::Settle(Bin* b, std::vector<IoRequest*>& out) {
  if (!b->waiting.empty()) return WriteBin(b, out);
  if (!b->closed) return;
  if (!b->to_hole) {
    eng_.CloseBin(b->bin);
  } else if (std::optional<Hole> sealed = packer_.Retire(b->bin, grain_ - b->fill)) {
    SealHole(*sealed);
  }
  bins_.Put(b);
}

void ZstdQueue::OnBinWritten(IoRequest& r) {
  Bin* b = static_cast<Bin*>(r.user_data);
  ZstdQueue* q = b->q;
  std::vector<GrainOp*> done;
  done.swap(b->in_write);
  q->PutBuffer(b->wbuf);
  // Finishing an operation may submit more (re-entrantly): until they are all finished, `b`
  // stays busy, so what is placed in it waits and `b` is not retired or sealed under us.
  for (GrainOp* op : done) {
    if (r.status) {
      q->eng_.Unlock(op->v);  // the fragment's space in the bin stays unused
    } else {
      q->eng_.Remap(op->v, op->entry);
    }
    op->locked = false;
    q->Finish(op, r.status);
  }
  b->writing = false;
  std::vector<IoRequest*> out;
  q->Settle(b, out);
  q->SubmitLower(out);
}

void ZstdQueue::OnTailRead(IoRequest& r) {
  Bin* b = static_cast<Bin*>(r.user_data);
  ZstdQueue* q = b->q;
  b->writing = false;
  if (!r.status) {
    std::memcpy(b->image.data() + b->tail, b->wbuf->data(), b->tail_end - b->tail);
  }
  q->PutBuffer(b->wbuf);
  std::vector<GrainOp*> failed;
  if (r.status) {
    // The bin cannot be added to: the fragments placed in it fail, and it is sealed.
    failed.swap(b->waiting);
    if (!b->closed) q->packer_.Remove(b);
    if (!b->closed || b->to_hole) {
      q->Count(ZstdDevice::kSealedBins);
      q->Count(ZstdDevice::kSealedFreeBytes, q->grain_ - b->fill);
    }
    b->closed = true;
    b->to_hole = false;
  }
  std::vector<IoRequest*> out;
  q->Settle(b, out);
  for (GrainOp* op : failed) {
    q->eng_.Unlock(op->v);
    op->locked = false;
    q->Finish(op, r.status);
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
  PendingParent* ctx = op->ctx;
  PutBuffer(op->buf);
  PutBuffer(op->cbuf);
  ops_.Put(op);
  FinishParent(ctx, status);
}

// ---------------------------------------------------------------------------------------------
// Reads

// Raw grains are read in runs of consecutive bins; fragments one by one, then decompressed;
// the others read as zeros.
void ZstdQueue::StartRead(IoRequest* parent, std::vector<IoRequest*>& out) {
  ReadGrains(
      parent, out,
      [](uint64_t e, uint64_t* bin) {
        if (!ZstdEngine::IsFragment(e) || !ZstdEngine::Decode(e).raw()) return false;
        *bin = ZstdEngine::Decode(e).bin;
        return true;
      },
      [&](PendingParent* ctx, uint64_t e, uint32_t in_off, uint32_t len, uint64_t rel) {
        if (!ZstdEngine::IsFragment(e)) return ZeroIov(parent->iov, parent->iovcnt, rel, len);
        ReadFragment(ctx, ZstdEngine::Decode(e), in_off, len, rel, out);
      });
}

void ZstdQueue::ReadFragment(PendingParent* ctx, const Fragment& f, uint32_t in_off,
                             uint32_t len, uint64_t iov_off, std::vector<IoRequest*>& out) {
  FragmentRead* r = fragments_.Get();
  r->q = this;
  r->ctx = ctx;
  r->frag = f;
  r->in_off = in_off;
  r->length = len;
  r->iov_off = iov_off;
  r->lo = AlignDown(f.offset);
  const uint32_t hi = AlignUp(f.offset + f.length);
  r->buf = GetBuffer();
  r->iov = iovec{r->buf->data(), hi - r->lo};
  r->lower = IoRequest{};
  r->lower.op = Op::kRead;
  r->lower.offset = BinOffset(f.bin) + r->lo;
  r->lower.length = hi - r->lo;
  r->lower.iov = &r->iov;
  r->lower.iovcnt = 1;
  r->lower.on_complete = &ZstdQueue::OnFragment;
  r->lower.user_data = r;
  ctx->Add();
  out.push_back(&r->lower);
}

void ZstdQueue::OnFragment(IoRequest& req) {
  FragmentRead* r = static_cast<FragmentRead*>(req.user_data);
  ZstdQueue* q = r->q;
  const IoRequest* parent = r->ctx->parent();
  std::error_code status = req.status;
  q->eng_.Unpin(r->frag.bin);
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
  PendingParent* ctx = r->ctx;
  q->fragments_.Put(r);
  q->FinishParent(ctx, status);
}

}  // namespace

std::unique_ptr<IoQueue> NewZstdQueue(ZstdDevice& device, std::unique_ptr<IoQueue> lower) {
  return std::make_unique<ZstdQueue>(device, std::move(lower));
}

}  // namespace vstack
