// The host's own CPU Ready: how long the benchmark's threads waited on a run queue of this
// machine's kernel, runnable but not running, because other work held the CPUs. To a thread
// it is indistinguishable from an injected CPU Ready stall (ready:, --cpu-ready), so the reports
// put the two side by side.
//
// Source: /proc/self/task/TID/schedstat, three numbers (the kernel's
// Documentation/scheduler/sched-stats.rst, "/proc/PID/schedstat"): time spent on the CPU (ns),
// time spent waiting on a run queue (ns), timeslices run on this CPU. A kernel built without
// schedule statistics has no such file, and one that does not keep them at run time prints
// "0 0 0" (fs/proc/base.c): both read as "not available", never as a zero wait.
//
// host RDY% = run-queue wait summed over the threads / (threads x wall time of the window), the
// share of each thread's wall time it spent ready but not running (vSphere's %RDY per vCPU).
#ifndef VSTACK_BENCH_WORKLOAD_HOST_READY_H_
#define VSTACK_BENCH_WORKLOAD_HOST_READY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

// One thread's cumulative scheduling counters.
struct SchedStat {
  uint64_t on_cpu_ns = 0;
  uint64_t run_queue_ns = 0;  // waited on a run queue (runnable, not running)
  uint64_t timeslices = 0;
};

// Parses the contents of a schedstat file ("ON_CPU_NS RUN_QUEUE_NS TIMESLICES", one line).
// nullopt when malformed, or "0 0 0" (the kernel keeps no statistics: a thread that exists has
// run, so its on-CPU time is never 0).
std::optional<SchedStat> ParseSchedStat(std::string_view text);

// The whole of a /proc file, or "" if it cannot be opened or read (a thread that exited).
// Never throws.
std::string ReadProcFile(const std::string& path);
// Reads `path`; nullopt when it cannot be read (no such thread, no schedstat) or does not parse.
std::optional<SchedStat> ReadSchedStat(const std::string& path);
// The schedstat file of thread `tid` of this process, and of the calling thread.
std::string ThreadSchedStatPath(int tid);
inline constexpr const char* kOwnSchedStatPath = "/proc/thread-self/schedstat";

// The counters of a set of threads at one moment, by thread id.
struct SchedSnapshot {
  bool complete = true;  // false: a thread that must be measured could not be read
  std::map<int, SchedStat> threads;

  // Records `tid`'s reading; a missing one (nullopt) makes the snapshot incomplete when
  // `required`, and is left out otherwise (a helper thread that exited in between).
  void Add(int tid, const std::optional<SchedStat>& s, bool required);
};

// The run-queue wait of a set of threads over one window.
struct HostReady {
  bool measured = false;      // false: n/a (no schedstat, or a required thread unreadable)
  uint64_t run_queue_ns = 0;  // summed over the threads
  uint32_t threads = 0;
  double wall_s = 0;

  // run_queue_ns / (threads x wall_s), in percent; -1 when not measured or nothing to divide by.
  double Pct() const;
};

// The wait between two snapshots of the same threads, over `wall_s` seconds of wall time.
// Threads are those of `after`; one absent from `before` counts from 0 (it started in the
// window); one absent from `after` is not counted (it exited: its wait is lost). Counters that
// went backwards (a reused thread id) count from 0. Not measured if either snapshot is
// incomplete or `after` holds no thread.
HostReady HostReadyBetween(const SchedSnapshot& before, const SchedSnapshot& after, double wall_s);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_HOST_READY_H_
