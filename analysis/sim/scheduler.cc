#include "analysis/sim/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "lib/size.h"

namespace vstack::sim {

enum ThreadState : int { kRunnable, kWaiting, kSleeping, kRunning, kDone };

struct Scheduler::Thread {
  std::string name;
  std::unique_ptr<Fiber> fiber;
  int state = kRunnable;
  const char* what = "";
  uint64_t seen = 0;   // activity_ when it began to wait
  uint64_t until = 0;  // kSleeping: when it wakes
};

Scheduler::Scheduler(uint64_t seed, DiskTiming timing)
    : rng_(seed), ids_(SplitMix64(seed ^ 0x1D5)), timing_(timing) {
  previous_host_ = SetSimHost(this);
  previous_waiter_ = SetProgressWaiter(this);
  previous_entropy_ = SetEntropySource(this);
}

Scheduler::~Scheduler() { Detach(); }

void Scheduler::Detach() {
  if (!installed_) return;
  installed_ = false;
  SetSimHost(previous_host_);
  SetProgressWaiter(previous_waiter_);
  SetEntropySource(previous_entropy_);
}

void Scheduler::SetDisk(const std::string& name, SimDiskEntry entry) { disks_[name] = entry; }

SimDiskEntry* Scheduler::Disk(const std::string& name) {
  auto it = disks_.find(name);
  return it == disks_.end() ? nullptr : &it->second;
}

std::string Scheduler::DiskNames() {
  std::string names;
  for (const auto& [name, entry] : disks_) names += (names.empty() ? "" : ", ") + name;
  return names.empty() ? "no disks" : names;
}

void Scheduler::Spawn(std::string name, std::function<void()> body) {
  auto t = std::make_unique<Thread>();
  t->name = std::move(name);
  t->fiber = std::make_unique<Fiber>(std::move(body));
  threads_.push_back(std::move(t));
  ++activity_;
  last_progress_ = now_;
}

void Scheduler::Trace(uint64_t tag, uint64_t value) {
  // FNV-1a over the two words.
  for (uint64_t w : {tag, value}) {
    for (int i = 0; i < 8; ++i) {
      trace_ ^= (w >> (8 * i)) & 0xFF;
      trace_ *= 0x100000001B3ull;
    }
  }
}

void Scheduler::NoteProgress() {
  last_progress_ = now_;
  ++activity_;
}

Scheduler::Thread* Scheduler::Running() {
  for (auto& t : threads_) {
    if (t->state == kRunning) return t.get();
  }
  return nullptr;
}

void Scheduler::SuspendAs(int state, const char* what, uint64_t until) {
  Thread* t = Running();
  if (t == nullptr || Fiber::Current() != t->fiber.get()) {
    std::fprintf(stderr, "vstack sim: '%s' outside a simulated thread: it would block the "
                 "simulation for good\n", what);
    std::abort();
  }
  t->state = state;
  t->what = what;
  t->seen = activity_;
  t->until = until;
  idle_polls_ = 0;
  Fiber::Suspend();
}

void Scheduler::Wait(const char* what) { SuspendAs(kWaiting, what, 0); }

void Scheduler::Yield() { SuspendAs(kRunnable, "yield", 0); }

void Scheduler::SleepUntil(uint64_t deadline_ns) {
  if (deadline_ns <= now_) return;
  longest_sleep_ns_ = std::max(longest_sleep_ns_, deadline_ns - now_);
  if (Fiber::Current() == nullptr) {
    now_ = deadline_ns;
    return;
  }
  SuspendAs(kSleeping, "sleeping on the virtual clock", deadline_ns);
}

bool Scheduler::Submitted(SimRequest& r) {
  r.id = next_request_++;
  ++activity_;
  const IoRequest& q = *r.req;
  if (faults_ && rng_.Chance(timing_.eio_rate)) {
    r.error = std::make_error_code(std::errc::io_error);
    if (q.op == Op::kWrite && q.length > 512 && rng_.Chance(timing_.torn_error_rate)) {
      r.land = rng_.Below(q.length / 512) * 512;
    }
  }
  Trace(2, (r.id << 8) ^ (static_cast<uint64_t>(q.op) << 4) ^ (r.error ? 1 : 0));
  Trace(3, q.offset ^ (q.length << 40));
  if (rng_.Chance(timing_.inline_rate)) return true;
  uint64_t delay = rng_.Between(timing_.min_delay_ns, timing_.max_delay_ns);
  if (rng_.Chance(timing_.slow_rate)) delay += rng_.Below(20 * timing_.max_delay_ns);
  r.due = now_ + delay;
  pending_.push_back(&r);
  return false;
}

void Scheduler::Polled(SimQueue& q, size_t reaped) {
  (void)q;
  if (reaped > 0) {
    ++activity_;
    idle_polls_ = 0;
    return;
  }
  // A thread that polls and polls without ever waiting through the progress seam busy-waits
  // for something only the other threads can do, which the simulator cannot see (and which
  // never comes: they do not run). That is a wait without its seam: a failure.
  constexpr uint64_t kSpin = 100'000;
  if (++idle_polls_ >= kSpin && Fiber::Current() != nullptr) {
    hang_report_ = Report("a busy wait: a thread polled its queues " + std::to_string(kSpin) +
                          " times in a row, reaping nothing, without waiting through the "
                          "progress seam (lib/progress.h)");
    busy_wait_ = true;
    SuspendAs(kWaiting, "busy-waiting (polls without waiting)", 0);
  }
}

void Scheduler::QueueOpened(SimQueue& q) { queues_.push_back(&q); }

void Scheduler::QueueClosed(SimQueue& q) {
  queues_.erase(std::find(queues_.begin(), queues_.end(), &q));
}

void Scheduler::Candidates(std::vector<int>& out) {
  out.clear();
  for (size_t i = 0; i < threads_.size(); ++i) {
    const Thread& t = *threads_[i];
    if (t.state == kRunnable || (t.state == kWaiting && t.seen != activity_) ||
        (t.state == kSleeping && t.until <= now_)) {
      out.push_back(static_cast<int>(i));
    }
  }
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i]->due <= now_) out.push_back(static_cast<int>(threads_.size() + i));
  }
}

void Scheduler::Step(int candidate) {
  ++steps_;
  if (static_cast<size_t>(candidate) < threads_.size()) {
    Thread& t = *threads_[candidate];
    if (t.state == kSleeping) ++activity_;
    t.state = kRunning;
    now_ += rng_.Below(timing_.step_ns + 1);
    t.fiber->Resume();
    if (t.fiber->done()) {
      if (t.fiber->error()) {
        try {
          std::rethrow_exception(t.fiber->error());
        } catch (const std::exception& e) {
          t.what = "threw an exception";
          hang_report_ = t.name + " threw: " + e.what();
        } catch (...) {
          hang_report_ = t.name + " threw an exception";
        }
        exception_ = true;
      }
      t.fiber.reset();  // its stack is free again
      t.state = kDone;
      ++activity_;
      last_progress_ = now_;
    }
    return;
  }
  const size_t i = candidate - threads_.size();
  SimRequest* r = pending_[i];
  pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
  ++activity_;
  r->queue->Deliver(*r);
}

void Scheduler::QuietRound() {
  for (size_t i = 0; i < threads_.size(); ++i) {
    if (threads_[i]->state == kWaiting) Step(static_cast<int>(i));
  }
}

bool Scheduler::LivenessExpired() {
  // A layer that sleeps on the virtual clock (delay:latency=3s) is waiting, not stuck: the
  // bound grows to twice the longest sleep asked for.
  const uint64_t bound = std::max(timing_.liveness_ns, 2 * longest_sleep_ns_);
  if (now_ - last_progress_ <= bound) return false;
  hang_report_ = Report("no progress for " + std::to_string(bound / 1'000'000) +
                        " ms of simulated time (a livelock; the longest sleep asked for was " +
                        std::to_string(longest_sleep_ns_ / 1'000'000) + " ms)");
  return true;
}

Scheduler::End Scheduler::Run(const std::function<bool()>& stop) {
  std::vector<int> candidates;
  size_t quiet = 0;
  for (;;) {
    const size_t alive = static_cast<size_t>(std::count_if(
        threads_.begin(), threads_.end(), [](const auto& t) { return t->state != kDone; }));
    if (alive == 0) return End::kDone;
    if (stop && stop()) return End::kStopped;
    if (LivenessExpired()) return End::kHang;
    Candidates(candidates);
    if (!candidates.empty()) {
      quiet = 0;
      const int pick = candidates[rng_.Below(candidates.size())];
      Trace(1, static_cast<uint64_t>(pick));
      Step(pick);
      if (exception_) return End::kThrew;
      if (busy_wait_) return End::kHang;
      continue;
    }
    // Nothing the scheduler can see may happen now. Let every waiting fiber look once more (it
    // may wait for something it cannot see): once before time moves on, and as many rounds as
    // there are fibers before giving up.
    uint64_t next = UINT64_MAX;
    for (const SimRequest* r : pending_) next = std::min(next, r->due);
    for (const auto& t : threads_) {
      if (t->state == kSleeping) next = std::min(next, t->until);
    }
    if (quiet < (next == UINT64_MAX ? alive : 1)) {
      ++quiet;
      const uint64_t before = activity_;
      QuietRound();
      if (exception_) return End::kThrew;
      if (busy_wait_) return End::kHang;
      if (activity_ != before) quiet = 0;
      continue;
    }
    quiet = 0;
    if (next == UINT64_MAX) {
      hang_report_ = Report(
          "deadlock: every simulated thread waits, and nothing is in flight on the simulated "
          "disks that could wake one");
      return End::kHang;
    }
    now_ = std::max(now_, next);
  }
}

std::string Scheduler::Report(const std::string& why) {
  std::string out = why + "\n";
  out += "  at simulated time " + std::to_string((now_ - 1'000'000'000) / 1000) + " us, step " +
         std::to_string(steps_) + "\n  threads:\n";
  static const char* kStates[] = {"runnable", "waiting", "sleeping", "running", "done"};
  for (const auto& t : threads_) {
    out += "    " + t->name + ": " + kStates[t->state];
    if (t->state == kWaiting || t->state == kSleeping) out += std::string(" (") + t->what + ")";
    out += "\n";
  }
  if (report_top_ != nullptr) {
    out += "  requests in flight on each queue, top layer first (queues in opening order):\n";
    for (BlockDevice* d = report_top_; d != nullptr; d = d->lower()) {
      out += "    " + d->kind() + ":";
      for (uint64_t n : d->InFlightByQueue()) out += " " + std::to_string(n);
      out += "\n";
    }
  }
  out += "  simulated disks, per queue (in opening order):\n";
  for (size_t i = 0; i < queues_.size(); ++i) {
    SimQueue* q = queues_[i];
    out += "    sim:" + q->sim_device().name() + " queue " + std::to_string(i) + ": " +
           std::to_string(q->in_flight()) + " in flight";
    for (const SimRequest* r : pending_) {
      if (r->queue != q) continue;
      out += "; " + std::string(OpName(r->req->op)) + " " + std::to_string(r->req->length) +
             " @ " + std::to_string(r->req->offset) + " due in " +
             std::to_string((r->due - std::min(r->due, now_)) / 1000) + " us";
    }
    for (const SimRequest* r : q->ready()) {
      out += "; " + std::string(OpName(r->req->op)) + " " + std::to_string(r->req->length) +
             " @ " + std::to_string(r->req->offset) +
             " COMPLETED, never reaped: nobody polls this queue";
    }
    out += "\n";
  }
  return out;
}

}  // namespace vstack::sim
