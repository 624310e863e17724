// CPU time of this process (all its threads, io_uring workers included), of the benchmark's own
// threads (all of them but the thread that measures), and of every CPU
// of the machine, so a run reports what it cost and how busy the machine was around it. On a
// shared machine, "others" (machine busy time minus ours) says how much the neighbours took.
#ifndef VSTACK_BENCH_WORKLOAD_CPU_USAGE_H_
#define VSTACK_BENCH_WORKLOAD_CPU_USAGE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

// Cumulative times from /proc/stat for one CPU, in seconds.
struct CpuTimes {
  double user = 0;    // user + nice
  double kernel = 0;  // system + irq + softirq
  double idle = 0;    // idle + iowait
  double steal = 0;   // taken by the hypervisor for other guests
};

struct CpuSnapshot {
  double process_user_s = 0;  // getrusage(RUSAGE_SELF): the same as /proc/self/stat, in us
  double process_kernel_s = 0;
  double caller_s = 0;        // the calling thread's own CPU (CLOCK_THREAD_CPUTIME_ID)
  std::vector<CpuTimes> cpus;  // /proc/stat cpuN lines
};

// Reads the process and per-CPU counters. Never fails: missing /proc gives empty cpus.
CpuSnapshot TakeCpuSnapshot();

// The thread ids of this process's io_uring kernel workers (threads named iou-wrk-* and
// iou-sqp-* in /proc/self/task): the queues' helper threads, with their own CPU and wait.
std::vector<int> IoUringWorkerThreads();
// CPU seconds (user + system) of each io_uring kernel worker of this process (threads named
// iou-wrk-* and iou-sqp-* in /proc/self/task), by thread id: from schedstat (nanoseconds), or
// from stat (clock ticks) on a kernel that keeps no schedule statistics.
std::map<int, double> IoUringWorkerCpu();
// The CPU those workers used between two readings; a worker that appeared in between counts from
// 0, one that exited in between is lost (io-wq workers idle out after seconds, not mid-run).
double IoUringWorkerCpuBetween(const std::map<int, double>& before,
                               const std::map<int, double>& after);

// CPU use over an interval.
struct CpuUsage {
  double wall_s = 0;
  double process_user_s = 0;
  double process_kernel_s = 0;
  std::vector<CpuTimes> cpus;  // per-CPU time spent in each state during the interval
  // The benchmark's own CPU: every thread of this process but the one that took the snapshots
  // (the workload threads, the io_uring workers, the layers' helper threads, and any thread a
  // library started). < 0 when not measured (then CPU per I/O falls back to the process's time).
  double threads_s = -1;
  // Where it went, for the per-layer CPU: the io_uring workers (their /proc stat), and what the
  // sampler charged to the workload threads' own code (lib/cpu_account.h) when `sampled`. The
  // layers' part is in their LayerDelta; sampling_error says why nothing was sampled.
  double uring_workers_s = 0;
  double engine_s = 0;
  bool sampled = false;
  std::string sampling_error;
  double load_average = -1;  // 1-minute load average at the end of the interval; < 0 unknown

  double process_s() const { return process_user_s + process_kernel_s; }
  // Busy seconds summed over all CPUs (user + kernel; steal is reported on its own).
  double machine_busy_s() const;
  // Busy seconds of the machine that were not ours (never negative).
  double others_s() const;
  // Seconds of CPU capacity in the interval: wall x number of CPUs.
  double capacity_s() const;
  // Steal seconds summed over all CPUs.
  double steal_s() const;
  // The CPU the benchmark itself used: threads_s when measured, else process_s().
  double own_s() const { return threads_s >= 0 ? threads_s : process_s(); }
  void Merge(const CpuUsage& other);  // adds another interval
};

CpuUsage CpuBetween(const CpuSnapshot& before, const CpuSnapshot& after, double wall_s);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_CPU_USAGE_H_
