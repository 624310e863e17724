// IoQueue: the per-thread submission and completion path every device shares: validation,
// emulation of what a device does not do itself (splits, FUA, write-zeroes), timing, CPU tags,
// and completion delivery (lib/block_device.h has the contract).
#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>

#include "lib/block_device.h"
#include "lib/clock.h"
#include "lib/cpu_tag.h"
#include "lib/iovec.h"
#include "lib/parent_completion.h"

namespace vstack {

using internal::t_cpu_tag;
using internal::TagScope;

// A request the base class issues on behalf of a caller's request (a piece of a split request,
// the flush that emulates FUA, a write of zeros). Its IoRequest::internal_ points at the
// Fanout it belongs to, which is how Drain() tells it from a caller's request.
struct IoQueue::Child {
  IoRequest req;
  std::vector<iovec> iov;
};

// Tracks the children of one caller's request.
struct IoQueue::Fanout {
  PendingParent done;        // the caller's request, its children outstanding, first error
  IoQueue* queue = nullptr;
  bool flush_after = false;  // emulated FUA: flush once every child succeeded
};

namespace {

constexpr size_t kZeroBufferSize = 64 * 1024;
constexpr uint64_t kMaxEmulatedZeroWrite = 1024 * 1024;

// A static, 4 KiB-aligned buffer of zeros used to emulate write-zeroes.
const void* ZeroBuffer() {
  alignas(4096) static const char kZeros[kZeroBufferSize] = {};
  return kZeros;
}

constexpr IoFlags AllowedFlags(Op op) {
  switch (op) {
    case Op::kWrite: return kIoFua;
    case Op::kDiscard: return kIoFua;
    case Op::kWriteZeroes: return kIoFua | kIoMayUnmap | kIoFastZero;
    default: return 0;
  }
}

uint64_t BytesOf(const IoRequest& r) { return r.op == Op::kFlush ? 0 : r.length; }

// The time shared through a stack on this thread (StatsMode::kLatency queues only, see
// lib/stats.h). Submit and Poll start a fresh context and restore the caller's on return; a
// Drain sets one around each callback of a completed request. A context lives on the stack of
// the call that set it; the thread points at the current one (null: none), so that setting and
// restoring one is a pointer store, not a copy.
//
// Paths are copied whole (kMaxStackDepth entries, a fixed 32-byte copy, not a loop per level):
// a timed queue keeps every entry of a request's path_ns_ above the levels it has filled at 0
// (Admit zeroes all, LinkTime and CompleteTimed keep them 0), so a whole copy carries the same
// values as a copy of the filled levels.
struct TimeContext {
  // A timestamp a Submit takes instead of reading the clock (0: read). In a callback: the
  // lower request's completion time.
  uint64_t now = 0;
  uint64_t latency_ns = 0;            // in a callback: the lower request's latency
  const uint32_t* path_ns = nullptr;  // and its path: kMaxStackDepth levels, 0 above path_levels
  int32_t path_levels = 0;            // the levels of path_ns that may be non-zero
  bool in_callback = false;  // a lower request's callback is running: the fields above are set
  bool linked = false;       // ... and it completed a request of this thread's upper queue
};
constinit thread_local TimeContext* t_time = nullptr;

// Sets a fresh context (sharing `now`) for a Submit or Poll and restores the caller's when it
// returns.
class ScopedTime {
 public:
  ScopedTime(bool active, uint64_t now) : active_(active) {
    if (!active_) return;
    context_.now = now;
    saved_ = t_time;
    t_time = &context_;
  }
  ~ScopedTime() {
    if (active_) t_time = saved_;
  }

 private:
  bool active_;
  TimeContext* saved_ = nullptr;
  TimeContext context_;
};

uint32_t Saturate32(uint64_t v) { return v > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(v); }

}  // namespace

int IoQueue::LevelOf(const BlockDevice& device) {
  int level = 0;
  for (const BlockDevice* d = device.lower(); d != nullptr; d = d->lower()) ++level;
  return std::min(level, kMaxStackDepth - 1);  // deeper levels add up into the last one
}

IoQueue::IoQueue(BlockDevice& device)
    : device_(device),
      stats_(device.counter_names_.size(), device.stats_mode() == StatsMode::kLatency),
      level_(LevelOf(device)),
      block_mask_(device.geometry().logical_block - 1),
      mem_mask_(device.geometry().mem_alignment - 1),
      max_transfer_(device.geometry().max_transfer ? device.geometry().max_transfer : UINT64_MAX),
      write_flags_(device.Has(kCapFua) ? IoFlags{kIoFua} : IoFlags{0}),
      writable_(device.Has(kCapWrite)),
      cpu_tag_(&device.cpu_account()) {
  device_.AddQueue(this);
}

IoQueue::~IoQueue() {
  assert(in_flight_ == 0 && "IoQueue destroyed with requests in flight; call WaitIdle()");
  device_.RemoveQueue(this);
}

std::error_code IoQueue::Validate(const IoRequest& r) const {
  const Geometry& g = device_.geometry();
  if (static_cast<int>(r.op) >= kOpCount) return Errc::kInvalidArgument;
  if (r.flags & ~AllowedFlags(r.op)) return Errc::kInvalidArgument;
  if (r.op == Op::kFlush) return {};
  if (r.op != Op::kRead && device_.read_only()) return Errc::kReadOnly;
  if (r.length == 0) return Errc::kInvalidArgument;
  if ((r.offset | r.length) & (g.logical_block - 1)) return Errc::kUnaligned;
  const uint64_t size = device_.size_bytes();
  if (r.offset > size || r.length > size - r.offset) return Errc::kOutOfRange;
  switch (r.op) {
    case Op::kDiscard:
      if (!device_.Has(kCapDiscard)) return Errc::kNotSupported;
      return {};
    case Op::kWriteZeroes:
      if ((r.flags & kIoFastZero) && !device_.Has(kCapFastZeroes)) return Errc::kNotSupported;
      return {};
    default:
      break;
  }
  if (r.iov == nullptr && r.iovcnt != 0) return Errc::kInvalidArgument;
  const uint64_t mask = g.mem_alignment - 1;
  uint64_t total = 0;
  for (uint32_t i = 0; i < r.iovcnt; ++i) {
    const iovec& v = r.iov[i];
    if ((reinterpret_cast<uintptr_t>(v.iov_base) | v.iov_len) & mask) {
      return Errc::kBadBufferAlignment;
    }
    total += v.iov_len;
  }
  if (total != r.length) return Errc::kInvalidArgument;
  return {};
}

inline void IoQueue::Admit(IoRequest& r, uint64_t now, CpuAccount* submitter_tag) {
  // Only the fields this queue reads back: next_ is set when the request completes, status
  // by Complete, the time fields only when this queue keeps time.
  r.internal_ = nullptr;
  r.cpu_tag_ = submitter_tag;  // its callback runs as its submitter's code
  if (now != 0) {
    r.submit_ns_ = now;
    r.done_ns_ = 0;
    r.below_ns_ = 0;
    std::memset(r.path_ns_, 0, sizeof r.path_ns_);  // every level: see TimeContext
  }
  ++in_flight_;
  stats_.OnSubmit();
}

inline bool IoQueue::IsPlain(const IoRequest& r, bool forwarded) const {
  if (r.op == Op::kRead) {
    if (r.flags != 0) return false;
  } else if (r.op != Op::kWrite || !writable_ || (r.flags & ~write_flags_) != 0) {
    return false;  // other ops, read-only, flags to refuse or emulate: the full path
  }
  const uint64_t size = device_.size_bytes();
  // length - 1 wraps for 0: one test for "0 < length <= max_transfer".
  if (r.length - 1 >= max_transfer_ || ((r.offset | r.length) & block_mask_) ||
      r.offset > size || r.length > size - r.offset) {
    return false;
  }
  if (forwarded) return true;  // the buffers were checked above, by a rule as strict
  if (r.iovcnt != 1 || r.iov == nullptr) return false;
  return ((reinterpret_cast<uintptr_t>(r.iov->iov_base) | r.iov->iov_len) & mem_mask_) == 0 &&
         r.iov->iov_len == r.length;
}

bool IoQueue::NeedsEmulation(const IoRequest& r) const {
  const uint64_t max = device_.geometry().max_transfer;
  const bool emulate_fua = (r.flags & kIoFua) && !device_.Has(kCapFua);
  switch (r.op) {
    case Op::kRead: return max && r.length > max;
    case Op::kWrite: return (max && r.length > max) || emulate_fua;
    case Op::kWriteZeroes:
      return !device_.Has(kCapWriteZeroes) || (max && r.length > max) || emulate_fua;
    case Op::kDiscard: return emulate_fua;
    case Op::kFlush: return false;
  }
  return false;
}

IoQueue::Child* IoQueue::NewChild(Fanout* fan, Op op, IoFlags flags, uint64_t offset,
                                  uint64_t length) {
  std::unique_ptr<Child> c;
  if (free_children_.empty()) {
    c = std::make_unique<Child>();
  } else {
    c = std::move(free_children_.back());
    free_children_.pop_back();
  }
  c->iov.clear();
  c->req = IoRequest{};
  c->req.op = op;
  c->req.flags = flags;
  c->req.offset = offset;
  c->req.length = length;
  c->req.on_complete = &IoQueue::OnChildDone;
  c->req.internal_ = fan;
  c->req.user_data = c.get();
  fan->done.Add();
  return c.release();
}

void IoQueue::AddSplitChildren(Fanout* fan, IoRequest& req, uint64_t chunk,
                               std::vector<IoRequest*>& out) {
  const IoFlags flags = fan->flush_after ? (req.flags & ~kIoFua) : req.flags;
  for (uint64_t done = 0; done < req.length; done += chunk) {
    const uint64_t len = std::min(chunk, req.length - done);
    Child* c = NewChild(fan, req.op, flags, req.offset + done, len);
    if (req.op == Op::kRead || req.op == Op::kWrite) {
      IovSlice(req.iov, req.iovcnt, done, len, &c->iov);
      c->req.iov = c->iov.data();
      c->req.iovcnt = static_cast<uint32_t>(c->iov.size());
    }
    out.push_back(&c->req);
  }
}

void IoQueue::Emulate(IoRequest& req, std::vector<IoRequest*>& out) {
  std::unique_ptr<Fanout> f;
  if (free_fanouts_.empty()) {
    f = std::make_unique<Fanout>();
  } else {
    f = std::move(free_fanouts_.back());
    free_fanouts_.pop_back();
  }
  Fanout* fan = f.release();
  fan->done.Start(&req, 0);
  fan->queue = this;
  fan->flush_after = (req.flags & kIoFua) && !device_.Has(kCapFua);

  const Geometry& g = device_.geometry();
  const uint64_t max = g.max_transfer ? g.max_transfer : UINT64_MAX;
  if (req.op == Op::kWriteZeroes && !device_.Has(kCapWriteZeroes)) {
    // Write zeros from a shared buffer, in pieces of at most 1 MiB.
    uint64_t chunk = std::min<uint64_t>(max, kMaxEmulatedZeroWrite);
    chunk -= chunk % g.logical_block;
    const IoFlags flags = fan->flush_after ? 0 : (req.flags & kIoFua);
    for (uint64_t done = 0; done < req.length; done += chunk) {
      const uint64_t len = std::min(chunk, req.length - done);
      Child* c = NewChild(fan, Op::kWrite, flags, req.offset + done, len);
      for (uint64_t z = 0; z < len; z += kZeroBufferSize) {
        c->iov.push_back(iovec{const_cast<void*>(ZeroBuffer()),
                               static_cast<size_t>(std::min<uint64_t>(kZeroBufferSize, len - z))});
      }
      c->req.iov = c->iov.data();
      c->req.iovcnt = static_cast<uint32_t>(c->iov.size());
      out.push_back(&c->req);
    }
    return;
  }
  if (req.op == Op::kDiscard) {
    AddSplitChildren(fan, req, req.length, out);
    return;
  }
  AddSplitChildren(fan, req, std::min(max, req.length), out);
}

void IoQueue::OnChildDone(IoRequest& child) {
  Child* c = static_cast<Child*>(child.user_data);
  Fanout* fan = static_cast<Fanout*>(child.internal_);
  IoQueue* q = fan->queue;
  q->free_children_.emplace_back(c);
  if (fan->done.Done(child.status)) q->FinishFanout(fan);
}

void IoQueue::FinishFanout(Fanout* fan) {
  if (!fan->done.error() && fan->flush_after) {
    fan->flush_after = false;
    Child* flush = NewChild(fan, Op::kFlush, 0, 0, 0);
    IoRequest* one = &flush->req;
    DoSubmit(std::span<IoRequest* const>(&one, 1));
    return;
  }
  IoRequest* parent = fan->done.parent();
  const std::error_code error = fan->done.error();
  free_fanouts_.emplace_back(fan);
  Complete(*parent, error);
}

void IoQueue::Submit(std::span<IoRequest* const> batch) { SubmitBatch(batch, false); }

void IoQueue::SubmitBatch(std::span<IoRequest* const> batch, bool forwarded) {
  const bool timed = stats_.latency();
  // One clock read per batch, or none when the caller shares its time (a layer submitting
  // from its own Submit, or from a completion callback).
  const uint64_t shared = timed && t_time != nullptr ? t_time->now : 0;
  const uint64_t now = !timed ? 0 : shared != 0 ? shared : NowNs();
  ScopedTime scope(timed, now);
  // From here on the device's code runs; the requests' callbacks will run as their submitter's.
  TagScope tag(cpu_tag_);
  // The common case: no callback is running and every request is plain. The batch then goes
  // to the device as it is, without being copied.
  size_t plain = 0;
  if (!draining_) {
    while (plain < batch.size() && IsPlain(*batch[plain], forwarded)) {
      Admit(*batch[plain++], now, tag.saved());
    }
    if (plain == batch.size()) {
      if (plain != 0) DoSubmit(batch);
      Drain();
      return;
    }
  }
  // While callbacks run (draining_), new requests are plugged: collected in plugged_ and
  // handed to the device as one batch when the drain runs dry, so a burst of resubmissions
  // from completion callbacks costs one device submission (one io_uring_submit), not one each.
  // Nothing below runs a callback or submits to this queue until DoSubmit, so plugged_ is
  // filled in place; otherwise reuse scratch_ without assuming we are its only user.
  std::vector<IoRequest*> ready;
  if (!draining_) ready.swap(scratch_);
  std::vector<IoRequest*>& out = draining_ ? plugged_ : ready;
  if (plain != 0) out.insert(out.end(), batch.begin(), batch.begin() + plain);  // admitted above
  for (size_t i = plain; i < batch.size(); ++i) {
    IoRequest* r = batch[i];
    Admit(*r, now, tag.saved());
    if (IsPlain(*r, forwarded)) {
      out.push_back(r);
    } else if (std::error_code ec = Validate(*r)) {
      Complete(*r, ec);
    } else if (NeedsEmulation(*r)) {
      Emulate(*r, out);
    } else {
      out.push_back(r);
    }
  }
  if (draining_) return;  // the running Drain submits plugged_
  if (!ready.empty()) DoSubmit(ready);
  ready.clear();
  if (ready.capacity() > scratch_.capacity()) scratch_.swap(ready);
  Drain();
}

void IoQueue::LinkTime(IoRequest& req) {
  TimeContext* const ctx = t_time;
  if (ctx == nullptr || !ctx->in_callback) return;
  // Completed from a lower request's callback: its completion time is ours, its latency is
  // the time below us, its path continues ours.
  req.done_ns_ = ctx->now;
  req.below_ns_ = ctx->latency_ns;
  ctx->linked = true;
  if (ctx->path_levels <= level_) {
    // The common case, a lower request from a level below ours: its path is 0 from our level
    // up, so the whole copy leaves our level at 0 (our own time comes at completion).
    std::memcpy(req.path_ns_, ctx->path_ns, sizeof req.path_ns_);
    return;
  }
  std::memcpy(req.path_ns_, ctx->path_ns, level_ * sizeof(uint32_t));
  // Levels at or above ours (a lower request from a side chain as deep as we are, such as a
  // differencing image's parent) count as our own time, so that the path still adds up.
  uint64_t extra = 0;
  for (int l = level_; l < kMaxStackDepth; ++l) {
    extra += ctx->path_ns[l];
    req.path_ns_[l] = 0;
  }
  req.path_ns_[level_] = Saturate32(extra);
}

void IoQueue::PostCompletion(IoRequest& req, std::error_code status) {
  req.status = status;
  req.done_ns_ = 0;  // completed on another thread: timed when this thread reaps it
  req.below_ns_ = 0;
  std::lock_guard lock(posted_mu_);
  posted_.push_back(&req);
  has_posted_.store(true, std::memory_order_release);
}

void IoQueue::MovePosted() {
  std::vector<IoRequest*> posted;
  {
    std::lock_guard lock(posted_mu_);
    posted.swap(posted_);
    has_posted_.store(false, std::memory_order_relaxed);
  }
  for (IoRequest* r : posted) PushCompletion(*r);
}

inline void IoQueue::RunCallback(IoRequest& r) {
  t_cpu_tag = r.cpu_tag_;
  r.on_complete(r);
  t_cpu_tag = cpu_tag_;
}

size_t IoQueue::Drain() {
  if (draining_) return 0;  // the outer Drain on this stack will pick up new completions
  draining_ = true;
  size_t n = 0;
  uint64_t batch_now = 0;  // this completion batch's time, read when first needed
  uint64_t last = 0;       // the latest time this drain used
  for (;;) {
    if (done_head_ == nullptr) {
      if (has_posted_.load(std::memory_order_acquire)) MovePosted();
    }
    if (done_head_ == nullptr) {
      if (plugged_.empty()) break;
      // Unplug: submit what the callbacks queued, as one batch; inline completions land on
      // the done list and the loop goes on.
      std::vector<IoRequest*> batch;
      batch.swap(plugged_);
      {
        ScopedTime scope(stats_.latency(), last);
        DoSubmit(batch);
      }
      batch_now = 0;  // what completes now belongs to the next completion batch
      batch.clear();
      if (batch.capacity() > plugged_.capacity()) plugged_.swap(batch);
      continue;
    }
    IoRequest* r = done_head_;
    done_head_ = r->next_;
    if (done_head_ == nullptr) done_tail_ = nullptr;
    if (r->internal_ != nullptr) {  // one of our own children
      if (stats_.latency()) {
        // Its parent completes with the child's time, below and path.
        CompleteTimed(*r, batch_now, last, /*own=*/false);
      } else {
        r->on_complete(*r);
      }
      continue;
    }
    --in_flight_;
    stats_.OnComplete(r->op, BytesOf(*r), static_cast<bool>(r->status));
    ++n;
    if (stats_.latency()) {
      CompleteTimed(*r, batch_now, last, /*own=*/true);
    } else if (r->on_complete) {
      RunCallback(*r);
    }
  }
  draining_ = false;
  return n;
}

void IoQueue::CompleteTimed(IoRequest& r, uint64_t& batch_now, uint64_t& last, bool own) {
  uint64_t t = r.done_ns_;
  if (t == 0) {
    if (batch_now == 0) batch_now = NowNs();
    t = batch_now;
  }
  last = std::max(last, t);
  uint32_t path[kMaxStackDepth];  // lives while the callback runs (which may reuse `r`)
  std::memcpy(path, r.path_ns_, sizeof path);
  TimeContext ctx;
  ctx.now = t;
  ctx.in_callback = true;
  ctx.path_ns = path;
  if (own) {
    const uint64_t latency = r.submit_ns_ != 0 && t >= r.submit_ns_ ? t - r.submit_ns_ : 0;
    stats_.OnLatency(r.op, latency);
    uint64_t self = 0;
    if (latency >= r.below_ns_) {
      self = latency - r.below_ns_;
    } else {
      // The lower request began before this one (it joined work in flight; PathStats counts it in `negative`): only our own
      // latency is on our path, so scale the levels below to it; the rounding left is ours.
      stats_.OnNegativeSelf();
      uint64_t kept = 0;
      for (int l = 0; l < level_; ++l) {
        path[l] = static_cast<uint32_t>(double(path[l]) * double(latency) / double(r.below_ns_));
        kept += path[l];
      }
      self = latency > kept ? latency - kept : 0;
    }
    path[level_] = Saturate32(uint64_t{path[level_]} + self);
    ctx.latency_ns = latency;
    ctx.path_levels = level_ + 1;
  } else {  // our own child: pass on what completed it, without our level (the parent's)
    ctx.latency_ns = r.below_ns_;
    path[level_] = 0;
    ctx.path_levels = level_;
  }
  TimeContext* const saved = t_time;
  t_time = &ctx;
  if (r.on_complete) {
    if (own) {
      RunCallback(r);
    } else {
      r.on_complete(r);  // our own child's: this queue's code
    }
  }
  t_time = saved;
  const bool linked = ctx.linked;
  // Nobody above completed from this callback: the request's path ends here.
  if (own && !linked) stats_.OnPathEnd(path, level_ + 1, ctx.latency_ns);
}

size_t IoQueue::Poll(size_t min_completions) {
  ScopedTime scope(stats_.latency(), 0);
  TagScope tag(cpu_tag_);
  size_t done = Drain();
  if (min_completions == 0) {
    DoPoll(false);
    return done + Drain();
  }
  while (done < min_completions && in_flight_ > 0) {
    DoPoll(!has_posted_.load(std::memory_order_acquire));
    done += Drain();
  }
  return done;
}

void IoQueue::WaitIdle() {
  assert((in_flight_ == 0 || !draining_) &&
         "WaitIdle from a completion callback of the same queue never returns");
  while (in_flight_ > 0) Poll(1);
}

}  // namespace vstack
