// The dedup device adapter: cuts requests into grains and drives each grain through the engine
// (dedup_engine.h) with asynchronous I/O on the queue below. A grain operation is a small state
// machine:
//
//   write, whole grain:   zero test + fingerprint -> claim -> [verify read] -> [data write]
//   write, partial grain: lock + read old grain (read-modify-write) -> merge -> claim -> ...
//   write-zeroes/discard: whole grains are remapped to zero; partial grains are merged zeros
//   read:                 look up (pinning) -> one lower read per run of consecutive grains
//
// A claim that finds its grain locked by another write, or an identical grain still being
// written, parks the operation; DoPoll retries parked operations. Flush commits the metadata
// (MetaStore) synchronously, as fdatasync does in the file backend.
#include "blockdev/dedup/dedup_device.h"

#include <cassert>
#include <cstring>

#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/size.h"

namespace vstack {
namespace {

constexpr char kMagic[] = "VSDEDUP1";
constexpr uint32_t kPayloadVersion = 1;
using Claim = DedupEngine::Claim;

// True if every piece of bytes [offset, offset+length) of the iovecs is aligned to `align`.
bool SliceAligned(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length,
                  uint64_t align) {
  if (align <= 1) return true;
  std::vector<iovec> pieces;
  IovSlice(iov, iovcnt, offset, length, &pieces);
  for (const iovec& v : pieces) {
    if ((reinterpret_cast<uintptr_t>(v.iov_base) | v.iov_len) & (align - 1)) return false;
  }
  return true;
}

// True if `len` bytes at `buf` equal bytes [offset, offset+len) of the iovecs.
bool EqualsIov(const void* buf, const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t len) {
  const char* b = static_cast<const char*>(buf);
  for (uint32_t i = 0; i < iovcnt && len > 0; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    const uint64_t take = std::min<uint64_t>(iov[i].iov_len - offset, len);
    if (std::memcmp(b, static_cast<const char*>(iov[i].iov_base) + offset, take) != 0) return false;
    b += take;
    len -= take;
    offset = 0;
  }
  return true;
}

class DedupQueue final : public LayerQueue {
 public:
  DedupQueue(DedupDevice& dev, std::unique_ptr<IoQueue> lower)
      : LayerQueue(dev, std::move(lower)),
        dev_(dev),
        eng_(dev.engine()),
        grain_(dev.grain()),
        align_(std::max<uint64_t>(4096, dev.lower_device().geometry().mem_alignment)),
        lower_align_(dev.lower_device().geometry().mem_alignment) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override;
  void DoPoll(bool wait) override;

 private:
  // One caller's request, completed when its last grain operation finishes.
  struct Ctx {
    IoRequest* parent = nullptr;
    uint32_t pending = 0;
    std::error_code error;
  };

  enum class Step { kStart, kRmwRead, kClaim, kVerifyRead, kWrite };

  // One grain of a write, write-zeroes or discard.
  struct GrainOp {
    DedupQueue* q = nullptr;
    Ctx* ctx = nullptr;
    Op op = Op::kWrite;      // kWrite or kWriteZeroes (discards too)
    bool unmap = false;      // the grain becomes unmapped rather than zero
    uint64_t v = 0;          // virtual grain
    uint32_t in_off = 0;     // bytes of the grain this operation covers
    uint32_t len = 0;
    uint64_t iov_off = 0;    // where those bytes are in the caller's iovecs (writes)
    Step step = Step::kStart;
    bool locked = false;     // holds v's lock (read-modify-write)
    bool commit_tried = false;
    bool zero = false;
    Fingerprint fp;
    uint32_t pgrain = 0;     // the old grain (RMW read), candidate (verify) or target (write)
    AlignedBuffer* buf = nullptr;   // the grain's new content, when not the caller's buffer
    AlignedBuffer* vbuf = nullptr;  // the candidate's content (verify)
    IoRequest lower;
    std::vector<iovec> iov;
  };

  // One lower read covering consecutive physical grains.
  struct ReadRun {
    DedupQueue* q = nullptr;
    Ctx* ctx = nullptr;
    uint32_t first_pgrain = 0;
    uint32_t pgrains = 0;
    uint64_t iov_off = 0;  // where the run's bytes go in the caller's iovecs
    AlignedBuffer* bounce = nullptr;  // when the caller's buffers do not suit the device below
    IoRequest lower;
    std::vector<iovec> iov;
  };

  const iovec* piov(const GrainOp* op) const { return op->ctx->parent->iov; }
  uint32_t piovcnt(const GrainOp* op) const { return op->ctx->parent->iovcnt; }

  void StartWrite(IoRequest* parent, std::vector<IoRequest*>& out);
  void StartRead(IoRequest* parent, std::vector<IoRequest*>& out);
  void Run(GrainOp* op, std::vector<IoRequest*>& out);
  void Merge(GrainOp* op, std::vector<IoRequest*>& out);
  void OnClaim(GrainOp* op, DedupEngine::ClaimResult r, std::vector<IoRequest*>& out);
  void IssueRead(GrainOp* op, uint32_t pgrain, AlignedBuffer* into, std::vector<IoRequest*>& out);
  void IssueWrite(GrainOp* op, std::vector<IoRequest*>& out);
  void Continue(GrainOp* op, std::error_code status);
  void Finish(GrainOp* op, std::error_code status);
  void FinishCtx(Ctx* ctx, std::error_code status);
  void Park(GrainOp* op) { parked_.push_back(op); }
  static void OnGrainIo(IoRequest& r);
  static void OnReadRun(IoRequest& r);

  AlignedBuffer* GetBuffer() {
    if (free_buffers_.empty()) {
      buffers_.push_back(std::make_unique<AlignedBuffer>(grain_, align_));
      return buffers_.back().get();
    }
    AlignedBuffer* b = free_buffers_.back();
    free_buffers_.pop_back();
    return b;
  }
  void PutBuffer(AlignedBuffer*& b) {
    if (b) free_buffers_.push_back(b);
    b = nullptr;
  }

  DedupDevice& dev_;
  DedupEngine& eng_;
  const uint32_t grain_;
  const uint64_t align_;
  const uint64_t lower_align_;
  RequestPool<Ctx> ctxs_;
  RequestPool<GrainOp> ops_;
  RequestPool<ReadRun> runs_;
  std::vector<std::unique_ptr<AlignedBuffer>> buffers_;
  std::vector<AlignedBuffer*> free_buffers_;
  std::vector<GrainOp*> parked_;
  std::vector<IoRequest*> scratch_;
  bool need_commit_ = false;
};

void DedupQueue::DoSubmit(std::span<IoRequest* const> batch) {
  if (eng_.pending_bytes() > dev_.commit_threshold()) (void)dev_.Commit();
  std::vector<IoRequest*> out;
  out.swap(scratch_);  // reuse its capacity; a callback may enter DoSubmit again
  for (IoRequest* parent : batch) {
    switch (parent->op) {
      case Op::kFlush: {
        Status s = dev_.Commit();
        Complete(*parent, s ? std::error_code() : s.error().code);
        break;
      }
      case Op::kRead:
        StartRead(parent, out);
        break;
      case Op::kWrite:
      case Op::kWriteZeroes:
      case Op::kDiscard:
        StartWrite(parent, out);
        break;
    }
  }
  if (!out.empty()) lower().Submit(out);
  out.clear();
  if (out.capacity() > scratch_.capacity()) scratch_.swap(out);
}

void DedupQueue::DoPoll(bool wait) {
  if (need_commit_) {
    need_commit_ = false;
    (void)dev_.Commit();  // frees grains released before it; failures surface as kNoSpace
  }
  if (!parked_.empty()) {
    std::vector<GrainOp*> retry;
    retry.swap(parked_);
    std::vector<IoRequest*> out;
    for (GrainOp* op : retry) {
      Count(DedupDevice::kRetries);
      Run(op, out);
    }
    if (!out.empty()) lower().Submit(out);
  }
  LayerQueue::DoPoll(wait);
}

void DedupQueue::StartWrite(IoRequest* parent, std::vector<IoRequest*>& out) {
  if (parent->op == Op::kWriteZeroes && (parent->flags & kIoFastZero) &&
      (parent->offset % grain_ || parent->length % grain_)) {
    // Zeroing part of a grain is a read-modify-write: not fast.
    Complete(*parent, Errc::kNotSupported);
    return;
  }
  Ctx* ctx = ctxs_.Get();
  *ctx = Ctx{parent, 1, {}};
  const bool unmap = parent->op == Op::kDiscard ||
                     (parent->op == Op::kWriteZeroes && (parent->flags & kIoMayUnmap));
  for (uint64_t pos = parent->offset; pos < parent->offset + parent->length;) {
    const uint64_t v = pos / grain_;
    const uint32_t in_off = static_cast<uint32_t>(pos % grain_);
    const uint32_t len = static_cast<uint32_t>(
        std::min<uint64_t>(grain_ - in_off, parent->offset + parent->length - pos));
    GrainOp* op = ops_.Get();
    op->q = this;
    op->ctx = ctx;
    op->op = parent->op == Op::kWrite ? Op::kWrite : Op::kWriteZeroes;
    op->unmap = unmap;
    op->v = v;
    op->in_off = in_off;
    op->len = len;
    op->iov_off = pos - parent->offset;
    op->step = Step::kStart;
    op->locked = op->commit_tried = op->zero = false;
    op->buf = op->vbuf = nullptr;
    ++ctx->pending;
    Run(op, out);
    pos += len;
  }
  FinishCtx(ctx, {});
}

void DedupQueue::Run(GrainOp* op, std::vector<IoRequest*>& out) {
  if (op->step == Step::kClaim) {
    OnClaim(op, eng_.ClaimWrite(op->v, op->zero, op->fp, dev_.verify(), op->locked), out);
    return;
  }
  assert(op->step == Step::kStart);
  const bool whole = op->len == grain_;
  if (whole && op->op == Op::kWriteZeroes) {
    if (eng_.SetZero(op->v, op->unmap, false) == Claim::kBusy) return Park(op);
    Count(DedupDevice::kZeroGrains);
    return Finish(op, {});
  }
  if (whole) {
    const iovec* iov = piov(op);
    const uint32_t cnt = piovcnt(op);
    op->zero = IsZeroIov(iov, cnt, op->iov_off, grain_);
    if (!op->zero) {
      if (!SliceAligned(iov, cnt, op->iov_off, grain_, lower_align_)) {
        // The caller's buffer cannot go to the device below as it is: write from a copy.
        op->buf = GetBuffer();
        CopyFromIov(iov, cnt, op->iov_off, op->buf->data(), grain_);
      }
      op->fp = FingerprintIov(iov, cnt, op->iov_off, grain_);
    }
    op->step = Step::kClaim;
    OnClaim(op, eng_.ClaimWrite(op->v, op->zero, op->fp, dev_.verify(), false), out);
    return;
  }
  uint32_t entry;
  if (!eng_.LockForRmw(op->v, &entry)) return Park(op);
  op->locked = true;
  op->buf = GetBuffer();
  if (entry >= DedupEngine::kFirstGrain) {
    op->step = Step::kRmwRead;
    Count(DedupDevice::kRmwReads);
    IssueRead(op, entry - DedupEngine::kFirstGrain, op->buf, out);
    return;
  }
  std::memset(op->buf->data(), 0, grain_);
  Merge(op, out);
}

void DedupQueue::Merge(GrainOp* op, std::vector<IoRequest*>& out) {
  std::byte* b = op->buf->data();
  if (op->op == Op::kWrite) {
    CopyFromIov(piov(op), piovcnt(op), op->iov_off, b + op->in_off, op->len);
  } else {
    std::memset(b + op->in_off, 0, op->len);
  }
  op->zero = IsZero(b, grain_);
  if (!op->zero) op->fp = FingerprintOf(b, grain_);
  op->step = Step::kClaim;
  OnClaim(op, eng_.ClaimWrite(op->v, op->zero, op->fp, dev_.verify(), true), out);
}

void DedupQueue::OnClaim(GrainOp* op, DedupEngine::ClaimResult r, std::vector<IoRequest*>& out) {
  switch (r.what) {
    case Claim::kDone:
      op->locked = false;
      Count(op->zero ? DedupDevice::kZeroGrains : DedupDevice::kDedupHits);
      return Finish(op, {});
    case Claim::kBusy:
      return Park(op);
    case Claim::kVerify:
      op->locked = true;
      op->step = Step::kVerifyRead;
      op->vbuf = GetBuffer();
      Count(DedupDevice::kVerifyReads);
      return IssueRead(op, r.pgrain, op->vbuf, out);
    case Claim::kWrite:
      op->locked = true;
      op->pgrain = r.pgrain;
      op->step = Step::kWrite;
      Count(DedupDevice::kUniqueWrites);
      return IssueWrite(op, out);
    case Claim::kNoSpace:
      op->locked = false;
      if (!op->commit_tried && eng_.pending_frees() > 0) {
        // Grains released since the last commit become free once it is durable: commit, then
        // start this grain over.
        op->commit_tried = true;
        need_commit_ = true;
        op->step = Step::kStart;
        PutBuffer(op->buf);
        return Park(op);
      }
      return Finish(op, Errc::kNoSpace);
  }
}

void DedupQueue::IssueRead(GrainOp* op, uint32_t pgrain, AlignedBuffer* into,
                           std::vector<IoRequest*>& out) {
  op->pgrain = pgrain;
  op->iov.assign(1, iovec{into->data(), grain_});
  op->lower = IoRequest{};
  op->lower.op = Op::kRead;
  op->lower.offset = dev_.data_offset() + uint64_t{pgrain} * grain_;
  op->lower.length = grain_;
  op->lower.iov = op->iov.data();
  op->lower.iovcnt = 1;
  op->lower.on_complete = &DedupQueue::OnGrainIo;
  op->lower.user_data = op;
  out.push_back(&op->lower);
}

void DedupQueue::IssueWrite(GrainOp* op, std::vector<IoRequest*>& out) {
  op->iov.clear();
  if (op->buf) {
    op->iov.push_back(iovec{op->buf->data(), grain_});
  } else {
    IovSlice(piov(op), piovcnt(op), op->iov_off, grain_, &op->iov);
  }
  op->lower = IoRequest{};
  op->lower.op = Op::kWrite;
  op->lower.offset = dev_.data_offset() + uint64_t{op->pgrain} * grain_;
  op->lower.length = grain_;
  op->lower.iov = op->iov.data();
  op->lower.iovcnt = static_cast<uint32_t>(op->iov.size());
  op->lower.on_complete = &DedupQueue::OnGrainIo;
  op->lower.user_data = op;
  out.push_back(&op->lower);
}

void DedupQueue::OnGrainIo(IoRequest& r) {
  GrainOp* op = static_cast<GrainOp*>(r.user_data);
  op->q->Continue(op, r.status);
}

void DedupQueue::Continue(GrainOp* op, std::error_code status) {
  std::vector<IoRequest*> out;
  switch (op->step) {
    case Step::kRmwRead:
      eng_.Unpin(op->pgrain);
      if (status) {
        eng_.Unlock(op->v);
        op->locked = false;
        Finish(op, status);
      } else {
        Merge(op, out);
      }
      break;
    case Step::kVerifyRead: {
      const void* candidate = op->vbuf->data();
      bool equal = false;
      if (!status) {
        equal = op->buf ? std::memcmp(candidate, op->buf->data(), grain_) == 0
                        : EqualsIov(candidate, piov(op), piovcnt(op), op->iov_off, grain_);
        if (!equal) Count(DedupDevice::kCollisions);
      }
      PutBuffer(op->vbuf);
      // A failed read of the candidate is treated as a mismatch: store the grain anew.
      OnClaim(op, eng_.FinishVerify(op->v, op->pgrain, op->fp, equal), out);
      break;
    }
    case Step::kWrite:
      eng_.FinishWrite(op->v, op->pgrain, op->fp, !status);
      op->locked = false;
      Finish(op, status);
      break;
    default:
      assert(false && "no I/O in this step");
  }
  if (!out.empty()) lower().Submit(out);
}

void DedupQueue::Finish(GrainOp* op, std::error_code status) {
  Ctx* ctx = op->ctx;
  PutBuffer(op->buf);
  PutBuffer(op->vbuf);
  ops_.Put(op);
  FinishCtx(ctx, status);
}

void DedupQueue::FinishCtx(Ctx* ctx, std::error_code status) {
  if (status && !ctx->error) ctx->error = status;
  if (--ctx->pending > 0) return;
  IoRequest* parent = ctx->parent;
  const std::error_code error = ctx->error;
  ctxs_.Put(ctx);
  Complete(*parent, error);
}

void DedupQueue::StartRead(IoRequest* parent, std::vector<IoRequest*>& out) {
  Ctx* ctx = ctxs_.Get();
  *ctx = Ctx{parent, 1, {}};
  const uint64_t first = parent->offset / grain_;
  const uint64_t last = (parent->offset + parent->length - 1) / grain_;
  std::vector<uint32_t> entries;
  eng_.LookupForRead(first, last - first + 1, &entries);
  ReadRun* run = nullptr;
  uint64_t run_end = 0;  // physical byte offset where the current run ends
  auto close_run = [&] {
    if (run == nullptr) return;
    run->lower.length = run_end - run->lower.offset;
    if (SliceAligned(parent->iov, parent->iovcnt, run->iov_off, run->lower.length, lower_align_)) {
      IovSlice(parent->iov, parent->iovcnt, run->iov_off, run->lower.length, &run->iov);
    } else {
      run->bounce = new AlignedBuffer(run->lower.length, align_);
      run->iov.push_back(run->bounce->iov());
    }
    run->lower.iov = run->iov.data();
    run->lower.iovcnt = static_cast<uint32_t>(run->iov.size());
    ++ctx->pending;
    out.push_back(&run->lower);
    run = nullptr;
  };
  for (uint64_t pos = parent->offset; pos < parent->offset + parent->length;) {
    const uint64_t v = pos / grain_;
    const uint32_t in_off = static_cast<uint32_t>(pos % grain_);
    const uint32_t len = static_cast<uint32_t>(
        std::min<uint64_t>(grain_ - in_off, parent->offset + parent->length - pos));
    const uint32_t e = entries[v - first];
    if (e < DedupEngine::kFirstGrain) {
      close_run();
      ZeroIov(parent->iov, parent->iovcnt, pos - parent->offset, len);
    } else {
      const uint32_t p = e - DedupEngine::kFirstGrain;
      const uint64_t phys = dev_.data_offset() + uint64_t{p} * grain_ + in_off;
      if (run && run_end == phys && p == run->first_pgrain + run->pgrains) {
        ++run->pgrains;
      } else {
        close_run();
        run = runs_.Get();
        run->q = this;
        run->ctx = ctx;
        run->first_pgrain = p;
        run->pgrains = 1;
        run->iov_off = pos - parent->offset;
        run->bounce = nullptr;
        run->iov.clear();
        run->lower = IoRequest{};
        run->lower.op = Op::kRead;
        run->lower.offset = phys;
        run->lower.on_complete = &DedupQueue::OnReadRun;
        run->lower.user_data = run;
      }
      run_end = phys + len;
    }
    pos += len;
  }
  close_run();
  FinishCtx(ctx, {});
}

void DedupQueue::OnReadRun(IoRequest& r) {
  ReadRun* run = static_cast<ReadRun*>(r.user_data);
  DedupQueue* q = run->q;
  q->eng_.UnpinRange(run->first_pgrain, run->pgrains);
  if (run->bounce) {
    if (!r.status) {
      IoRequest* parent = run->ctx->parent;
      CopyToIov(parent->iov, parent->iovcnt, run->iov_off, run->bounce->data(), r.length);
    }
    delete run->bounce;
    run->bounce = nullptr;
  }
  Ctx* ctx = run->ctx;
  q->runs_.Put(run);
  q->FinishCtx(ctx, r.status);
}

// ---------------------------------------------------------------------------------------------
// Opening

struct Layout {
  Superblock sb;
  uint64_t physical_grains = 0;
};

std::vector<uint8_t> EncodePayload(uint32_t grain, uint64_t size, uint64_t pgrains) {
  ByteWriter w;
  w.U32(kPayloadVersion);
  w.U32(grain);
  w.U64(size);
  w.U64(pgrains);
  return std::move(w.bytes());
}

uint64_t JournalBytes(uint64_t lower_size) {
  return std::clamp<uint64_t>(lower_size / 256, 1 << 20, 64 << 20) / kMetaPageSize * kMetaPageSize;
}

// Fits as many physical grains as the device below holds after the metadata they need.
Result<Layout> PlanLayout(uint32_t grain, uint64_t size, uint64_t lower_size) {
  const uint64_t vgrains = size / grain;
  uint64_t pgrains = std::min<uint64_t>(lower_size / grain, DedupEngine::kMaxPhysicalGrains);
  for (;;) {
    Superblock sb = MetaStore::Plan(
        kMagic,
        {TableDesc{0, vgrains, DedupEngine::kMapEntryBytes},
         TableDesc{0, pgrains, DedupEngine::kGrainEntryBytes}},
        JournalBytes(lower_size), EncodePayload(grain, size, pgrains));
    const uint64_t need = sb.data_offset + pgrains * grain;
    if (need <= lower_size && pgrains > 0) return Layout{std::move(sb), pgrains};
    const uint64_t excess = need > lower_size ? (need - lower_size + grain - 1) / grain : 1;
    if (excess >= pgrains) {
      return MakeError(Errc::kNoSpace, "dedup: the device below (" + FormatSize(lower_size) +
                                           ") is too small for the metadata of a " +
                                           FormatSize(size) + " dedup device");
    }
    pgrains -= excess;
  }
}

}  // namespace

uint64_t DedupMetadataBytes(uint64_t mapped_grains, uint64_t unique_grains) {
  return TableDesc{0, mapped_grains, DedupEngine::kMapEntryBytes}.bytes() +
         TableDesc{0, unique_grains, DedupEngine::kGrainEntryBytes}.bytes();
}

Result<DedupOptions> ParseDedupOptions(const OptionValues& values, uint64_t lower_size) {
  DedupOptions o;
  VSTACK_ASSIGN_OR_RETURN(uint64_t grain, values.Size("grain"));
  if (grain < 4096 || grain > 65536 || (grain & (grain - 1))) {
    return MakeError(Errc::kInvalidArgument, "dedup: option 'grain': " + std::to_string(grain) +
                                                 " is not a power of two from 4K to 64K");
  }
  o.grain = static_cast<uint32_t>(grain);
  o.grain_given = values.Has("grain");
  VSTACK_ASSIGN_OR_RETURN(o.verify, values.Bool("verify"));
  o.size_given = values.Has("size");
  if (o.size_given) {
    VSTACK_ASSIGN_OR_RETURN(o.size, values.Size("size"));
    if (o.size == 0 || o.size % o.grain) {
      return MakeError(Errc::kInvalidArgument, "dedup: option 'size': " + std::to_string(o.size) +
                                                   " is not a positive multiple of the grain (" +
                                                   std::to_string(o.grain) + ")");
    }
  } else {
    o.size = lower_size / o.grain * o.grain;
  }
  return o;
}

DedupDevice::DedupDevice(DevicePtr lower, uint32_t grain, bool verify, uint64_t size,
                         uint64_t physical_grains, std::unique_ptr<MetaStore> store,
                         uint64_t data_offset, bool read_only)
    : Layer("dedup", std::move(lower)),
      grain_(grain),
      verify_(verify),
      data_offset_(data_offset),
      metadata_bytes_(data_offset),
      store_(std::move(store)),
      engine_(std::make_unique<DedupEngine>(size / grain, physical_grains, store_.get())) {
  Geometry& g = mutable_geometry();
  g.size_bytes = size;
  g.physical_block = std::max<uint32_t>(g.physical_block, grain);
  g.optimal_transfer = grain;
  g.max_transfer = std::max<uint64_t>(1 << 20, grain);
  const Capabilities below = lower_device().capabilities();
  Capabilities caps = kCapRead | kCapFlush | kCapExtents | (below & (kCapPersistent | kCapThreadSafe));
  if (!read_only && (below & kCapWrite)) {
    caps |= kCapWrite | kCapDiscard | kCapWriteZeroes | kCapDiscardZeroes | kCapFastZeroes;
  }
  set_capabilities(caps);
  if (store_) commit_threshold_ = store_->superblock().journal_bytes / 4;
  DeclareCounters({"dedup_hits", "unique_writes", "zero_grains", "rmw_reads", "verify_reads",
                   "collisions", "retries", "commits"});
}

Result<DevicePtr> DedupDevice::Open(DevicePtr lower, const DedupOptions& o, bool read_only) {
  const std::string who = "dedup";
  if (!lower->Has(kCapThreadSafe)) {
    return MakeError(Errc::kNotSupported, "dedup: the device below must support several queues");
  }
  read_only = read_only || lower->read_only();
  const uint64_t lower_size = lower->geometry().size_bytes;
  Result<Superblock> sb = [&] {
    SyncIo io(*lower);
    return ReadSuperblock(io, kMagic, who);
  }();
  if (!sb && sb.error().code != make_error_code(Errc::kNotFound)) return std::move(sb).error();
  if (!sb) {
    // A blank device: format it (or, read-only, present it empty).
    VSTACK_ASSIGN_OR_RETURN(Layout layout, PlanLayout(o.grain, o.size, lower_size));
    std::unique_ptr<MetaStore> store;
    if (!read_only) {
      VSTACK_ASSIGN_OR_RETURN(store, MetaStore::Format(*lower, layout.sb, who));
    }
    auto* dev = new DedupDevice(std::move(lower), o.grain, o.verify, o.size,
                                layout.physical_grains, std::move(store), layout.sb.data_offset,
                                read_only);
    DevicePtr owned(dev);
    dev->engine_->FinishLoad();
    return owned;
  }
  ByteReader r(sb->payload);
  const uint32_t version = r.U32();
  const uint32_t grain = r.U32();
  const uint64_t size = r.U64();
  const uint64_t pgrains = r.U64();
  const std::string where = "dedup: superblock: ";
  if (!r.ok() || version != kPayloadVersion) {
    return MakeError(Errc::kCorruption, where + "unknown or truncated dedup fields (version " +
                                            std::to_string(version) + ")");
  }
  if (grain < 4096 || grain > 65536 || (grain & (grain - 1)) || size == 0 || size % grain ||
      pgrains == 0 || pgrains > DedupEngine::kMaxPhysicalGrains || sb->tables.size() != 2 ||
      sb->tables[0].entries != size / grain || sb->tables[1].entries != pgrains ||
      sb->tables[0].entry_size != DedupEngine::kMapEntryBytes ||
      sb->tables[1].entry_size != DedupEngine::kGrainEntryBytes ||
      sb->data_offset + pgrains * grain > lower_size) {
    return MakeError(Errc::kCorruption,
                     where + "inconsistent geometry (grain " + std::to_string(grain) + ", size " +
                         std::to_string(size) + ", " + std::to_string(pgrains) +
                         " physical grains, device below " + std::to_string(lower_size) + " bytes)");
  }
  if (o.grain_given && grain != o.grain) {
    return MakeError(Errc::kInvalidArgument, "dedup: option 'grain': the device was formatted with grain=" +
                                                 std::to_string(grain) + ", not " +
                                                 std::to_string(o.grain));
  }
  if (o.size_given && o.size != size) {
    return MakeError(Errc::kInvalidArgument, "dedup: option 'size': the device was formatted with size=" +
                                                 std::to_string(size) + ", not " +
                                                 std::to_string(o.size));
  }
  const uint64_t data_offset = sb->data_offset;
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<MetaStore> store,
                          MetaStore::Attach(*lower, std::move(*sb), read_only, who));
  MetaStore* s = store.get();
  auto* dev = new DedupDevice(std::move(lower), grain, o.verify, size, pgrains, std::move(store),
                              data_offset, read_only);
  DevicePtr owned(dev);
  DedupEngine& eng = *dev->engine_;
  Status loaded = s->Load([&](uint32_t table, uint64_t index, const uint8_t* entry) -> Status {
    Status st = eng.LoadEntry(table, index, entry);
    if (!st) return Annotate(std::move(st).error(), "dedup");
    return OkStatus();
  });
  if (!loaded) return std::move(loaded).error();
  eng.FinishLoad();
  return owned;
}

Result<std::unique_ptr<IoQueue>> DedupDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return std::unique_ptr<IoQueue>(new DedupQueue(*this, std::move(lower)));
}

Status DedupDevice::Commit() {
  if (!store_ || store_->read_only()) return OkStatus();
  auto lock = store_->LockCommits();
  DedupEngine::Snapshot snap = engine_->TakeSnapshot();
  Status s = store_->Commit(&snap.batch);
  engine_->FinishCommit(std::move(snap), s.has_value());
  CountCommit();
  return s;
}

Status DedupDevice::CloseLayer() {
  if (!store_) return OkStatus();
  Status s = store_->read_only() ? OkStatus() : Commit();
  auto lock = store_->LockCommits();
  Status c = store_->Close();
  return s ? c : s;
}

// ---------------------------------------------------------------------------------------------
// Reporting

std::string DedupDevice::Describe() const {
  return "dedup grain=" + FormatSize(grain_) + (verify_ ? " verify=on" : "") + ", " +
         std::to_string(engine_->physical_grains()) + " physical grains";
}

std::optional<SpaceUsage> DedupDevice::Space() const {
  const DedupEngine::Usage u = engine_->usage();
  const LayerStats st = Stats();
  SpaceUsage s;
  s.grain_bytes = grain_;
  s.logical_bytes_written = st.of(Op::kWrite).bytes + st.of(Op::kWriteZeroes).bytes;
  s.logical_bytes_live = u.live_grains * grain_;
  s.zero_grains = u.zero_grains;
  s.unique_grains = u.unique_grains;
  s.compressed_bytes = u.unique_grains * grain_;
  s.stored_bytes = u.unique_grains * grain_;
  s.physical_bytes_used = u.allocated_grains * grain_;
  s.metadata_bytes = metadata_bytes_;
  return s;
}

void DedupDevice::Properties(PropertyList& out) const {
  const DedupEngine::Usage u = engine_->usage();
  out.push_back({"grain", uint64_t{grain_}, "bytes"});
  out.push_back({"verify", verify_, ""});
  out.push_back({"virtual_grains", engine_->virtual_grains(), ""});
  out.push_back({"physical_grains", engine_->physical_grains(), ""});
  out.push_back({"data_offset", data_offset_, "bytes"});
  out.push_back({"index_entries", u.index_entries, ""});
  out.push_back({"index_memory_bytes", u.index_memory_bytes, "bytes"});
  out.push_back({"index_bytes_per_unique_grain",
                 u.unique_grains ? double(u.index_memory_bytes) / double(u.unique_grains) : 0.0,
                 "bytes"});
  out.push_back({"map_memory_bytes", u.map_memory_bytes, "bytes"});
  out.push_back({"dedup_ratio",
                 u.unique_grains ? double(u.live_grains - u.zero_grains) / double(u.unique_grains)
                                 : 0.0,
                 ""});
  out.push_back({"hash_collisions", u.collisions, ""});
  if (store_) {
    auto lock = store_->LockCommits();
    const MetaStore::Counters c = store_->counters();
    out.push_back({"journal_bytes", store_->superblock().journal_bytes, "bytes"});
    out.push_back({"journal_used_bytes", store_->journal_used(), "bytes"});
    out.push_back({"replayed_transactions", c.replayed_transactions, ""});
    out.push_back({"checkpoints", c.checkpoints, ""});
  }
  if (auto s = Space()) AppendSpaceProperties(*s, out);
}

Status DedupDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  constexpr uint64_t kBatch = 4096;  // map entries looked up per lock
  std::vector<uint32_t> entries;
  uint64_t batch_first = 0;
  for (uint64_t pos = offset; pos < offset + length;) {
    const uint64_t v = pos / grain_;
    if (entries.empty() || v >= batch_first + entries.size()) {
      entries.clear();
      batch_first = v;
      const uint64_t last = (offset + length - 1) / grain_;
      engine_->MapEntries(v, std::min<uint64_t>(kBatch, last - v + 1), &entries);
    }
    const uint64_t end = std::min<uint64_t>((v + 1) * grain_, offset + length);
    const uint32_t e = entries[v - batch_first];
    uint32_t flags = 0;
    if (e == DedupEngine::kUnmapped) flags = kExtentHole | kExtentZero;
    if (e == DedupEngine::kZero) flags = kExtentZero;
    AppendExtent(out, pos, end - pos, flags);
    pos = end;
  }
  return OkStatus();
}

Status DedupDevice::Check(CheckMode mode, CheckResult* out) {
  const uint64_t repaired_before = out->repaired;
  engine_->Check(mode, out);
  // Every used grain's content against its fingerprint.
  SyncIo io(lower_device());
  AlignedBuffer buf(grain_, std::max<uint64_t>(4096, lower_device().geometry().mem_alignment));
  for (const DedupEngine::UsedGrain& g : engine_->UsedGrains()) {
    const uint64_t offset = data_offset_ + uint64_t{g.pgrain} * grain_;
    if (std::error_code ec = io.Read(offset, buf.span())) {
      return MakeError(ec, "dedup: check: cannot read physical grain " + std::to_string(g.pgrain) +
                               " at offset " + std::to_string(offset) + ": " + ec.message());
    }
    if (!(FingerprintOf(buf.data(), grain_) == g.fp)) {
      out->Corruption("dedup: physical grain " + std::to_string(g.pgrain) + " at offset " +
                      std::to_string(offset) +
                      " does not match its fingerprint (data of virtual offset " +
                      std::to_string(g.some_vgrain * grain_) + " and any duplicates)");
    }
  }
  if (out->repaired > repaired_before && store_ && !store_->read_only()) return Commit();
  return OkStatus();
}

namespace {

ComponentInfo DedupComponent() {
  ComponentInfo c;
  c.name = "dedup";
  c.kind = ComponentKind::kLayer;
  c.summary = "inline deduplication of fixed-size grains (XXH3-128, zero elimination, refcounts)";
  c.options = {
      {"grain", "deduplication grain: a power of two from 4K to 64K", "4K"},
      {"verify", "compare bytes before sharing a grain (safe against hash collisions)", "off"},
      {"size", "virtual size (thin; default: the size of the device below)", ""},
  };
  c.open_layer = [](DevicePtr lower, const OptionValues& values,
                    const OpenOptions& open) -> Result<DevicePtr> {
    VSTACK_ASSIGN_OR_RETURN(DedupOptions o, ParseDedupOptions(values, lower->geometry().size_bytes));
    return DedupDevice::Open(std::move(lower), o, open.read_only);
  };
  return c;
}

}  // namespace

VSTACK_REGISTER_COMPONENT(dedup, DedupComponent());

}  // namespace vstack
