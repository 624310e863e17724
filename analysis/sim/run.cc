#include "analysis/sim/run.h"

#include <algorithm>
#include <memory>

#include "analysis/sim/content.h"
#include "lib/aligned_buffer.h"
#include "lib/sync_io.h"

namespace vstack::sim {
namespace {

constexpr uint64_t kVerifyChunk = 256 * 1024;  // Verify reads this much at a time

// What a run that hangs leaves behind: its threads are suspended in the middle of the stack's
// code, so neither may be destroyed. Kept reachable (not reported as leaks).
std::vector<std::shared_ptr<void>>& Graveyard() {
  static auto* graveyard = new std::vector<std::shared_ptr<void>>();
  return *graveyard;
}

class Run {
 public:
  Run(SimStack stack, const SimOptions& o, uint64_t seed)
      : o_(o), stack_(std::move(stack)), rng_(seed) {
    res_.seed = seed;
  }

  RunResult Go();

 private:
  void Fail(std::string kind, std::string message) {
    if (res_.failures.empty()) res_.failures.push_back({std::move(kind), std::move(message)});
  }
  bool failed() const { return !res_.failures.empty(); }
  // Runs `body` on a simulated thread until it ends. False if a failure happened.
  bool InThread(const std::string& name, const std::function<void()>& body);
  // Closes the stack (on a simulated thread) once the hang report no longer names it: a later
  // hang (a reopen's) listed the freed stack's requests in flight, a use after free that
  // killed the run's process ("out of memory" from a garbage string) or printed stale layers.
  void DropStack() {
    sched_->set_report_stack(nullptr);
    dev_.reset();
  }
  bool Hung(Scheduler::End end, const std::string& when);
  void DrawShape();
  bool Open(bool first);
  // The model, from what the stack shows after its first open; a `model` failure if the
  // simulator cannot tell.
  bool StartModel();
  bool Check(const std::string& when);
  // Reads every unit back: after a power cut (or a close that could not persist everything)
  // each must hold what the cut may leave, else exactly what the model says. A read that an
  // error layer fails on purpose is not compared (its units may hold what the cut may leave).
  bool Verify(bool after_cut);
  // Reads [at, at + buf.size()) for ReadBack: one request if the device takes it whole, else
  // one per piece of at most its transfer limit, submitted together as the queue would split
  // it. Each completion resets the liveness clock (a read the queue splits completes only once
  // its last piece has: through delay:bw=1K, 64 s per 64 KiB piece, longer than the liveness
  // bound). Returns the first error, in completion order, as the split read would.
  std::error_code ReadPieces(SyncIo& io, uint64_t at, std::span<std::byte> buf);
  // Verify's read of [at, at + n) into `buf`, and its comparison (Compare).
  void ReadBack(SyncIo& io, AlignedBuffer& buf, uint64_t at, uint64_t n, bool after_cut,
                uint64_t started, const std::string& when);
  void Compare(uint64_t at, uint64_t n, const uint8_t* data, bool after_cut, uint64_t started,
               const std::string& when);
  bool Epoch(uint64_t ops, bool cut);
  // Closes the stack; `clean`: the close persisted everything (it may fail for lack of space).
  bool Close(bool* clean);

  const SimOptions o_;
  SimStack stack_;
  SimRng rng_;
  RunResult res_;
  DiskTiming timing_;
  WorkloadConfig config_;
  uint32_t threads_ = 1;
  bool enospc_ = false;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<Model> model_;
  std::shared_ptr<Workload> workload_;
  DevicePtr dev_;
};

bool Run::Hung(Scheduler::End end, const std::string& when) {
  if (end != Scheduler::End::kHang && end != Scheduler::End::kThrew) return false;
  Fail(end == Scheduler::End::kHang ? "hang" : "exception", when + ": " + sched_->hang_report());
  res_.trace_hash = sched_->trace_hash();
  // The suspended threads hold the stack: keep both, and the scheduler that holds the threads
  // (no longer this thread's host).
  sched_->Detach();
  Graveyard().push_back(std::shared_ptr<void>(dev_.release(), [](void*) {}));
  Graveyard().push_back(workload_);
  Graveyard().push_back(std::shared_ptr<Scheduler>(std::move(sched_)));
  return true;
}

bool Run::InThread(const std::string& name, const std::function<void()>& body) {
  sched_->Spawn(name, body);
  if (Hung(sched_->Run(), name)) return false;
  return !failed();
}

void Run::DrawShape() {
  timing_.min_delay_ns = 500;
  timing_.max_delay_ns = rng_.Between(5'000, 200'000);
  timing_.inline_rate = rng_.Chance(0.3) ? 0.0 : rng_.Chance(0.5) ? 0.1 : 0.5;
  const bool faults = rng_.Chance(o_.fault_runs);
  timing_.eio_rate = faults ? o_.eio_rate : 0;
  enospc_ = rng_.Chance(o_.enospc_runs);
  threads_ = static_cast<uint32_t>(rng_.Between(1, std::max<uint32_t>(1, o_.queues)));
  config_.queue_depth = static_cast<uint32_t>(rng_.Between(1, std::max<uint32_t>(1, o_.depth)));
  config_.max_units = rng_.Chance(0.5) ? 16 : 256;
  config_.reads = static_cast<uint32_t>(rng_.Between(1, 6));
  config_.writes = static_cast<uint32_t>(rng_.Between(2, 8));
  config_.flushes = static_cast<uint32_t>(rng_.Between(0, 2));
  config_.discards = static_cast<uint32_t>(rng_.Between(0, 2));
  config_.zeroes = static_cast<uint32_t>(rng_.Between(0, 2));
  config_.maps = static_cast<uint32_t>(rng_.Below(2));
  config_.think = rng_.Chance(0.5) ? 0.1 : 0.5;
  config_.errors_expected = faults;
  config_.may_inject = [this](Op op, std::error_code ec) { return stack_.MayInject(op, ec); };
  sched_ = std::make_unique<Scheduler>(rng_.Next(), timing_);
  stack_.Prepare(*sched_, rng_);
}

bool Run::Open(bool first) {
  Error error;
  const bool ran = InThread(first ? "format and open" : "reopen", [&] {
    Result<DevicePtr> dev = stack_.Open(first);
    if (dev) {
      dev_ = std::move(*dev);
    } else {
      error = dev.error();
    }
  });
  if (!ran) return false;
  if (!dev_) {
    // An error layer below another may fail the reopen's reads and writes on purpose: the run
    // ends there, with nothing more to check.
    if (!first && stack_.InjectsBelow(error.code)) return false;
    Fail("open", std::string(first ? "formatting and opening" : "reopening") +
                     " the stack failed: " + error.ToString());
    return false;
  }
  sched_->set_report_stack(dev_.get());
  return true;
}

bool Run::StartModel() {
  Result<std::vector<uint64_t>> initial = stack_.InitialContent(dev_->size_bytes() / kUnit);
  if (!initial) {
    Fail("model", initial.error().ToString());
    return false;
  }
  model_ = std::make_unique<Model>(std::move(*initial));
  return true;
}

bool Run::Check(const std::string& when) {
  return InThread("check", [&] {
    for (BlockDevice* d = dev_.get(); d != nullptr && !failed(); d = d->lower()) {
      CheckResult found;
      Status s = d->Check(CheckMode::kReadOnly, &found);
      if (!s && stack_.InjectsBelow(s.error().code)) {
        sched_->Trace(42, 0);  // an error layer below failed its reads on purpose
      } else if (!s) {
        Fail("check", when + ": " + d->kind() + ": Check could not run: " + s.error().ToString());
      } else if (found.corruptions > 0) {
        std::string text;
        for (size_t i = 0; i < found.messages.size() && i < 5; ++i) text += "; " + found.messages[i];
        Fail("check", when + ": " + d->kind() + ": " + std::to_string(found.corruptions) +
                          " corruption(s)" + text);
      }
    }
  });
}

bool Run::Verify(bool after_cut) {
  const std::string when = after_cut ? "after a power cut" : "after a clean close";
  return InThread("verify", [&] {
    SyncIo io(*dev_);
    AlignedBuffer buf(kVerifyChunk, 4096);
    const uint64_t size = dev_->size_bytes();
    const uint64_t started = model_->BeginRead();
    for (uint64_t at = 0; at < size && !failed(); at += kVerifyChunk) {
      ReadBack(io, buf, at, std::min(kVerifyChunk, size - at), after_cut, started, when);
      sched_->NoteProgress();
    }
    model_->EndRead(started);
  });
}

std::error_code Run::ReadPieces(SyncIo& io, uint64_t at, std::span<std::byte> buf) {
  const uint64_t limit = dev_->geometry().max_transfer;
  IoQueue* q = io.queue();
  if (limit == 0 || buf.size() <= limit || q == nullptr) {
    const std::error_code ec = io.Read(at, buf);
    sched_->NoteAlive();
    return ec;
  }
  struct Pieces {
    Scheduler* sched = nullptr;
    size_t left = 0;
    std::error_code error;
  } state{sched_.get(), 0, {}};
  struct Piece {
    IoRequest req;
    iovec iov{};
  };
  std::vector<Piece> pieces((buf.size() + limit - 1) / limit);
  std::vector<IoRequest*> batch;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const uint64_t off = i * limit;
    Piece& p = pieces[i];
    p.iov = {buf.data() + off, static_cast<size_t>(std::min<uint64_t>(limit, buf.size() - off))};
    p.req.op = Op::kRead;
    p.req.offset = at + off;
    p.req.length = p.iov.iov_len;
    p.req.iov = &p.iov;
    p.req.iovcnt = 1;
    p.req.user_data = &state;
    p.req.on_complete = [](IoRequest& r) {
      auto* s = static_cast<Pieces*>(r.user_data);
      if (r.status && !s->error) s->error = r.status;
      --s->left;
      s->sched->NoteAlive();
    };
    batch.push_back(&p.req);
  }
  state.left = pieces.size();
  q->Submit(batch);
  while (state.left > 0) q->Poll(1);
  return state.error;
}

void Run::ReadBack(SyncIo& io, AlignedBuffer& buf, uint64_t at, uint64_t n, bool after_cut,
                   uint64_t started, const std::string& when) {
  const std::error_code ec = ReadPieces(io, at, buf.span().first(n));
  if (!ec)
    return Compare(at, n, reinterpret_cast<const uint8_t*>(buf.data()), after_cut, started, when);
  if (!stack_.MayInject(Op::kRead, ec)) {
    return Fail("error", when + ": reading back " + std::to_string(n) + " bytes at " +
                             std::to_string(at) + " failed: " + ec.message());
  }
  // An error layer failed it on purpose: read its pieces one by one, so that those that read
  // are still compared.
  const uint64_t piece = std::max<uint64_t>(4096, dev_->geometry().logical_block);
  if (n > piece) {
    for (uint64_t p = at; p < at + n && !failed(); p += piece) {
      ReadBack(io, buf, p, std::min(piece, at + n - p), after_cut, started, when);
    }
    return;
  }
  sched_->Trace(41, at);
  if (!after_cut) return;  // not compared: the run ends
  for (uint64_t u = at / kUnit; u < (at + n) / kUnit; ++u) model_->SettleUnread(u);
}

void Run::Compare(uint64_t at, uint64_t n, const uint8_t* data, bool after_cut, uint64_t started,
                  const std::string& when) {
  for (uint64_t i = 0; i < n / kUnit; ++i) {
    const uint64_t u = at / kUnit + i;
    const uint64_t got = UnitHash(data + i * kUnit);
    const std::string wrong =
        after_cut ? model_->CheckAfterCrash(u, got) : model_->CheckRead(u, 1, &got, started);
    if (!wrong.empty()) return Fail(after_cut ? "lost" : "data", when + ": " + wrong);
    model_->Settle(u, got);
    sched_->Trace(40, got);
  }
}

bool Run::Close(bool* clean) {
  std::error_code code;
  std::string error;
  const bool ran = InThread("close", [&] {
    Status s = dev_->Close();
    if (!s) {
      code = s.error().code;
      error = s.error().ToString();
    }
    DropStack();
  });
  if (!ran) return false;
  *clean = error.empty();
  // Out of space, a layer cannot commit what it holds: the close fails, and what it did not
  // persist is lost as in a power cut; so too when an error layer below fails its I/O on
  // purpose. Any other error is a failure.
  if (!error.empty() && code != std::errc::no_space_on_device && code != Errc::kNoSpace &&
      !stack_.InjectsBelow(code)) {
    Fail("close", "closing the stack failed: " + error);
    return false;
  }
  return true;
}

bool Run::Epoch(uint64_t ops, bool cut) {
  if (enospc_) {
    SimDisk& disk = *sched_->Disk("disk")->disk;
    disk.set_page_budget(disk.allocated_pages() + rng_.Below(1024));
  }
  const uint64_t size = dev_->size_bytes();
  config_.align_units = std::max<uint32_t>(dev_->geometry().logical_block / kUnit,
                                           rng_.Chance(0.3) ? 8 : 1);
  config_.region_bytes = size;
  config_.region_offset = 0;
  if (rng_.Chance(0.5)) {  // a hot region: more overlaps
    config_.region_bytes = std::min<uint64_t>(size, rng_.Between(16, 512) * 4096);
    config_.region_offset = rng_.Below((size - config_.region_bytes) / 4096 + 1) * 4096;
  }
  workload_ = std::make_shared<Workload>(*sched_, *model_, *dev_, config_, ops);
  sched_->set_faults(true);
  for (uint32_t i = 0; i < threads_; ++i) {
    sched_->Spawn("thread " + std::to_string(i),
                  [w = workload_.get(), i, r = rng_.Fork()] { w->Thread(static_cast<int>(i), r); });
  }
  const uint64_t cut_at = rng_.Between(1, ops);
  uint64_t extra_steps = rng_.Below(400);
  auto stop = [&] {
    if (!cut || workload_->submitted() < cut_at) return false;
    return extra_steps-- == 0;
  };
  Scheduler::End end = sched_->Run(stop);
  res_.ops += workload_->completed();  // a frozen workload completes no more (a cut, a failure)
  if (Hung(end, "the workload")) return false;
  sched_->set_faults(false);
  if (end == Scheduler::End::kStopped) {
    ++res_.power_cuts;
    sched_->Trace(50, res_.power_cuts);
    stack_.PowerCut(*sched_, rng_, o_.land_rate, o_.torn_rate);
    workload_->Freeze();
    if (Hung(sched_->Run(), "winding down after a power cut")) return false;
    // The old stack closes on the old disk, which nobody reads again.
    if (!InThread("drop the stack", [&] { DropStack(); })) return false;
  }
  for (const SimFailure& f : workload_->failures()) Fail(f.kind, f.message);
  if (failed()) return false;
  if (end == Scheduler::End::kStopped) {
    const std::string when = "after power cut " + std::to_string(res_.power_cuts);
    if (!Open(false) || !Check(when) || !Verify(true)) return false;
  }
  workload_.reset();
  return true;
}

RunResult Run::Go() {
  DrawShape();
  const uint64_t drawn = rng_.Chance(o_.crash_runs) ? rng_.Between(1, 3) : 0;
  // Each epoch has a request at least (the instant of its cut); the last one takes what the
  // division leaves, so that the epochs share exactly o_.ops.
  const uint64_t cuts = std::min<uint64_t>(drawn, std::max<uint64_t>(o_.ops, 1) - 1);
  if (Open(true) && StartModel()) {
    const uint64_t per_epoch = o_.ops / (cuts + 1);
    bool ok = true;
    for (uint64_t e = 0; e <= cuts && ok; ++e) {
      ok = Epoch(per_epoch + (e == cuts ? o_.ops % (cuts + 1) : 0), e < cuts);
    }
    bool clean = false;
    if (ok && Close(&clean) && Open(false) &&
        Check(clean ? "after a clean close" : "after a close that failed") &&
        Verify(/*after_cut=*/!clean)) {
      Close(&clean);
    }
  }
  if (sched_) res_.trace_hash = sched_->trace_hash();  // else Hung took it
  for (const SimFailure& f : res_.failures) {
    for (char c : f.kind) res_.trace_hash = (res_.trace_hash ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  }
  // A failure can leave the stack open: drop it on a simulated thread (it may do I/O).
  if (dev_ && sched_) {
    workload_.reset();
    sched_->Spawn("drop the stack", [&] { DropStack(); });
    const Scheduler::End end = sched_->Run();
    if (end == Scheduler::End::kHang || end == Scheduler::End::kThrew) {
      sched_->Detach();
      Graveyard().push_back(std::shared_ptr<void>(dev_.release(), [](void*) {}));
      Graveyard().push_back(std::shared_ptr<Scheduler>(std::move(sched_)));
    }
  }
  return res_;
}

}  // namespace

RunResult RunSeed(const SimStack& stack, const SimOptions& options, uint64_t seed) {
  Run run(stack, options, seed);
  return run.Go();
}

}  // namespace vstack::sim
