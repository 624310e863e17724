// CPU time of this process (all its threads, io_uring workers included) and of every CPU of
// the machine, so a run reports what it cost and how busy the machine was around it. On a
// shared machine, "others" (machine busy time minus ours) says how much the neighbours took.
#ifndef VSTACK_BENCH_WORKLOAD_CPU_USAGE_H_
#define VSTACK_BENCH_WORKLOAD_CPU_USAGE_H_

#include <cstdint>
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
  std::vector<CpuTimes> cpus;  // /proc/stat cpuN lines
};

// Reads the process and per-CPU counters. Never fails: missing /proc gives empty cpus.
CpuSnapshot TakeCpuSnapshot();

// CPU use over an interval.
struct CpuUsage {
  double wall_s = 0;
  double process_user_s = 0;
  double process_kernel_s = 0;
  std::vector<CpuTimes> cpus;  // per-CPU time spent in each state during the interval

  double process_s() const { return process_user_s + process_kernel_s; }
  // Busy seconds summed over all CPUs (user + kernel; steal is reported on its own).
  double machine_busy_s() const;
  // Busy seconds of the machine that were not ours (never negative).
  double others_s() const;
  // Seconds of CPU capacity in the interval: wall x number of CPUs.
  double capacity_s() const;
  void Merge(const CpuUsage& other);  // adds another interval
};

CpuUsage CpuBetween(const CpuSnapshot& before, const CpuSnapshot& after, double wall_s);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_CPU_USAGE_H_
