#include "bench/workload/quantum_scheduler.h"

#include <algorithm>

namespace vstack::bench {

YieldStats YieldStats::Between(const YieldStats& before, const YieldStats& after) {
  YieldStats d;
  d.yields = after.yields - before.yields;
  d.wait_ns = after.wait_ns - before.wait_ns;
  d.max_wait_ns = after.max_wait_ns;
  d.signal_wait_ns = after.signal_wait_ns - before.signal_wait_ns;
  d.stalls = after.stalls - before.stalls;
  d.stalled_ns = after.stalled_ns - before.stalled_ns;
  d.max_stall_ns = after.max_stall_ns;
  return d;
}

void YieldStats::Merge(const YieldStats& o) {
  yields += o.yields;
  wait_ns += o.wait_ns;
  max_wait_ns = std::max(max_wait_ns, o.max_wait_ns);
  signal_wait_ns += o.signal_wait_ns;
  stalls += o.stalls;
  stalled_ns += o.stalled_ns;
  max_stall_ns = std::max(max_stall_ns, o.max_stall_ns);
}

QuantumScheduler::QuantumScheduler(const SchedulerOptions& options, Clock& clock)
    : options_(options), clock_(clock) {
  const uint64_t now = clock_.Now();
  for (uint32_t i = 0; i < std::max<uint32_t>(1, options_.schedulers); ++i) {
    schedulers_.push_back(std::make_unique<Scheduler>());
    if (options_.ready_fraction > 0) {
      schedulers_.back()->ready.emplace(options_.ready_fraction, options_.stall,
                                        options_.stall_quantum_ns, options_.seed + i, now);
    }
  }
}

void QuantumScheduler::WaitTurn(Scheduler& s, std::unique_lock<std::mutex>& lock) {
  Waiter me;
  s.runnable.push_back(&me);
  me.cv.wait(lock, [&] { return !s.busy && s.runnable.front() == &me; });
  s.runnable.pop_front();
  s.busy = true;
}

void QuantumScheduler::Release(Scheduler& s) {
  s.busy = false;
  if (!s.runnable.empty()) s.runnable.front()->cv.notify_one();
}

void QuantumScheduler::Run(uint32_t task) {
  Scheduler& s = Of(task);
  std::unique_lock lock(s.mu);
  WaitTurn(s, lock);
  s.quantum_start = clock_.Now();
}

void QuantumScheduler::Suspend(uint32_t task) {
  Scheduler& s = Of(task);
  std::lock_guard lock(s.mu);
  Release(s);
}

bool QuantumScheduler::Checkpoint(uint32_t task) {
  Scheduler& s = Of(task);
  std::unique_lock lock(s.mu);
  uint64_t now = clock_.Now();
  if (s.ready) {
    if (const uint64_t stall = s.ready->Due(now); stall != 0) {
      // The vCPU is off the CPU: the scheduler stays taken, nothing else on it runs.
      lock.unlock();
      clock_.SleepUntil(now + stall);
      lock.lock();
      ++s.stats.stalls;
      s.stats.stalled_ns += stall;
      s.stats.max_stall_ns = std::max(s.stats.max_stall_ns, stall);
      now = clock_.Now();
    }
  }
  if (now - s.quantum_start < options_.quantum_ns) return false;
  const uint64_t yield_start = now;
  Release(s);
  const uint64_t runnable_at = clock_.Now();
  WaitTurn(s, lock);
  const uint64_t resumed = clock_.Now();
  s.quantum_start = resumed;
  const uint64_t wait = resumed - yield_start;
  ++s.stats.yields;
  s.stats.wait_ns += wait;
  s.stats.signal_wait_ns += resumed - runnable_at;
  s.stats.max_wait_ns = std::max(s.stats.max_wait_ns, wait);
  return true;
}

uint32_t QuantumScheduler::Work(uint32_t task, uint64_t cpu_ns) {
  const uint64_t slice = std::max<uint64_t>(1, options_.checkpoint_ns);
  uint32_t yields = 0;
  // With work_sleeps the task sleeps until `origin + done`: origin moves on by the time spent
  // in checkpoints, so a late wake-up is made up by the next step instead of piling up.
  uint64_t origin = options_.work_sleeps ? clock_.Now() : 0;
  for (uint64_t done = 0; done < cpu_ns;) {
    const uint64_t step = std::min(slice, cpu_ns - done);
    done += step;
    if (options_.work_sleeps) {
      clock_.SleepUntil(origin + done);
      const uint64_t before = clock_.Now();
      yields += Checkpoint(task);
      origin += clock_.Now() - before;
    } else {
      clock_.Spin(step);
      yields += Checkpoint(task);
    }
  }
  return yields;
}

size_t QuantumScheduler::RunnableTasks(uint32_t task) {
  Scheduler& s = Of(task);
  std::lock_guard lock(s.mu);
  return s.runnable.size();
}

YieldStats QuantumScheduler::Snapshot(bool reset_max) {
  YieldStats total;
  for (auto& s : schedulers_) {
    std::lock_guard lock(s->mu);
    total.Merge(s->stats);
    if (reset_max) s->stats.max_wait_ns = s->stats.max_stall_ns = 0;
  }
  return total;
}

}  // namespace vstack::bench
