// A cooperative quantum scheduler for the workload's threads, in the manner of SQL Server's
// SQLOS: each scheduler (a virtual CPU) runs one task (a workload thread) at a time; a task
// keeps its scheduler until it waits for I/O (Suspend) or sees, at a checkpoint, that its
// quantum of *wall-clock* time is used up, and then yields: it goes to the back of the
// scheduler's runnable queue (SOS_SCHEDULER_YIELD) and waits for its turn. A task that computes
// (Work) checks its quantum every `checkpoint_ns` of CPU, so a long enough stretch of work ends
// quanta by itself: the base of yields a CPU-bound query has without any CPU Ready.
//
// CPU Ready: with a ready fraction, each scheduler has a StallSchedule; at a checkpoint where a
// stall is due, the running task sleeps for it while holding its scheduler (the vCPU is off the
// physical CPU: nothing on it runs). Wall time jumps, so the task finds its quantum used up and
// yields: a stall that ends a quantum early adds a yield to the base. Everything queued on the
// scheduler waits through the stall: the yielders already queued, and the tasks whose I/O
// completed meanwhile, which the stalled task then yields behind. So a yield's wait grows with
// the stalls' length, not only the yields' number (docs/presets.md, section 3).
//
// Yield statistics are what sys.dm_os_wait_stats shows for SOS_SCHEDULER_YIELD:
// waiting_tasks_count, wait_time_ms, max_wait_time_ms and signal_wait_time_ms. A yield's wait
// runs from the moment the task decides to yield to the moment it runs again; its signal wait
// from the moment it is in the runnable queue (for a yield the task is runnable at once, so
// signal wait is nearly all of it, as in SQL Server).
//
// Thread-safe: every task calls from its own thread. Time comes from a Clock (tests use a
// ManualClock).
#ifndef VSTACK_BENCH_WORKLOAD_QUANTUM_SCHEDULER_H_
#define VSTACK_BENCH_WORKLOAD_QUANTUM_SCHEDULER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "bench/workload/yield_stats.h"
#include "blockdev/emulation/service_time.h"
#include "blockdev/emulation/stall_schedule.h"
#include "lib/clock.h"

namespace vstack::bench {

struct SchedulerOptions {
  uint32_t schedulers = 1;
  uint64_t quantum_ns = 4'000'000;  // SQLOS's 4 ms
  double ready_fraction = 0;        // RDY% / 100
  ServiceTime stall = ServiceTime::Fixed(4'000'000);
  uint64_t stall_quantum_ns = 1'000'000;  // stall lengths are whole multiples of this
  uint64_t checkpoint_ns = 100'000;       // Work's CPU between two checkpoints
  // Work holds the scheduler for its time asleep instead of burning a host core: a model of
  // more vCPUs than the host has cores (its checkpoints are at the same points of its time).
  bool work_sleeps = false;
  uint64_t seed = 1;
};

class QuantumScheduler {
 public:
  // Task t runs on scheduler t % schedulers.
  QuantumScheduler(const SchedulerOptions& options, Clock& clock);

  // Task t takes its scheduler, after the tasks queued before it (FIFO).
  void Run(uint32_t task);
  // Task t gives its scheduler up to wait for something else (I/O). Not a yield.
  void Suspend(uint32_t task);
  // The running task t between two steps of work: stalls if CPU Ready is due, then yields if
  // its quantum is used up. Returns true if it yielded.
  bool Checkpoint(uint32_t task);
  // The running task t computes for `cpu_ns` of CPU time (Clock::Spin: real work on the calling
  // thread; with work_sleeps, asleep on its scheduler until that much of its own time has
  // passed), with a Checkpoint after every `checkpoint_ns` of it. Time spent inside a
  // Checkpoint (a stall, a yield's wait) is not work. Returns the yields it made.
  uint32_t Work(uint32_t task, uint64_t cpu_ns);

  // runnable_tasks_count of task t's scheduler (as sys.dm_os_schedulers shows it): the tasks
  // queued for it, yielders and tasks whose wait ended.
  size_t RunnableTasks(uint32_t task);

  // Statistics so far, summed over the schedulers; `reset_max` starts a new max-wait window.
  YieldStats Snapshot(bool reset_max = false);

 private:
  // A task waiting in a runnable queue; it lives on the waiting thread's stack, so a hand-over
  // wakes only the next in line, however long the queue.
  struct Waiter {
    std::condition_variable cv;
  };
  struct Scheduler {
    std::mutex mu;
    bool busy = false;
    std::deque<Waiter*> runnable;
    uint64_t quantum_start = 0;
    std::optional<StallSchedule> ready;
    YieldStats stats;
  };
  Scheduler& Of(uint32_t task) { return *schedulers_[task % schedulers_.size()]; }
  // Queues the calling task and waits until it is first and the scheduler is free; takes it.
  // Holds `lock`.
  static void WaitTurn(Scheduler& s, std::unique_lock<std::mutex>& lock);
  // Gives the scheduler up and wakes the first in line. Holds s.mu.
  static void Release(Scheduler& s);

  const SchedulerOptions options_;
  Clock& clock_;
  std::vector<std::unique_ptr<Scheduler>> schedulers_;
};

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_QUANTUM_SCHEDULER_H_
