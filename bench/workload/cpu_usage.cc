#include "bench/workload/cpu_usage.h"

#include "bench/workload/host_ready.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace vstack::bench {

CpuSnapshot TakeCpuSnapshot() {
  CpuSnapshot s;
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
    s.process_user_s = double(ru.ru_utime.tv_sec) + double(ru.ru_utime.tv_usec) * 1e-6;
    s.process_kernel_s = double(ru.ru_stime.tv_sec) + double(ru.ru_stime.tv_usec) * 1e-6;
  }
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
    s.caller_s = double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
  }
  FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return s;
  const double tick = 1.0 / double(std::max(1L, sysconf(_SC_CLK_TCK)));
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9') continue;
    unsigned long long v[8] = {};
    int cpu = 0;
    if (std::sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1],
                    &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 5) {
      continue;
    }
    CpuTimes t;
    t.user = double(v[0] + v[1]) * tick;
    t.kernel = double(v[2] + v[5] + v[6]) * tick;
    t.idle = double(v[3] + v[4]) * tick;
    t.steal = double(v[7]) * tick;
    s.cpus.push_back(t);
  }
  std::fclose(f);
  return s;
}

CpuUsage CpuBetween(const CpuSnapshot& before, const CpuSnapshot& after, double wall_s) {
  CpuUsage u;
  u.wall_s = wall_s;
  u.process_user_s = std::max(0.0, after.process_user_s - before.process_user_s);
  u.process_kernel_s = std::max(0.0, after.process_kernel_s - before.process_kernel_s);
  u.threads_s = std::max(0.0, u.process_s() - std::max(0.0, after.caller_s - before.caller_s));
  const size_t n = std::min(before.cpus.size(), after.cpus.size());
  for (size_t i = 0; i < n; ++i) {
    const CpuTimes& a = before.cpus[i];
    const CpuTimes& b = after.cpus[i];
    u.cpus.push_back(CpuTimes{std::max(0.0, b.user - a.user), std::max(0.0, b.kernel - a.kernel),
                              std::max(0.0, b.idle - a.idle), std::max(0.0, b.steal - a.steal)});
  }
  return u;
}

std::vector<int> IoUringWorkerThreads() {
  std::vector<int> tids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    // ReadProcFile, not std::ifstream: a thread that exits meanwhile must not throw.
    const std::string comm = ReadProcFile(e.path() / "comm");
    if (comm.rfind("iou-", 0) == 0) {
      tids.push_back(std::atoi(e.path().filename().c_str()));
    }
  }
  return tids;
}

std::map<int, double> IoUringWorkerCpu() {
  std::map<int, double> out;
  const double tick = 1.0 / double(std::max(1L, sysconf(_SC_CLK_TCK)));
  for (int tid : IoUringWorkerThreads()) {
    // In nanoseconds from schedstat where the kernel keeps it; else in clock ticks from stat.
    if (auto ss = ReadSchedStat(ThreadSchedStatPath(tid)); ss && ss->timeslices != 0) {
      out[tid] = double(ss->on_cpu_ns) * 1e-9;
      continue;
    }
    const std::string stat = ReadProcFile("/proc/self/task/" + std::to_string(tid) + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 > stat.size()) continue;  // it exited meanwhile
    // Fields after the comm: state(3) ... utime(14) stime(15).
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::strtod(field.c_str(), nullptr);
      if (i == 15) stime = std::strtod(field.c_str(), nullptr);
    }
    out[tid] = (utime + stime) * tick;
  }
  return out;
}

double IoUringWorkerCpuBetween(const std::map<int, double>& before,
                               const std::map<int, double>& after) {
  double s = 0;
  for (const auto& [tid, cpu] : after) {
    auto it = before.find(tid);
    s += std::max(0.0, cpu - (it == before.end() ? 0.0 : it->second));
  }
  return s;
}

double CpuUsage::steal_s() const {
  double s = 0;
  for (const CpuTimes& c : cpus) s += c.steal;
  return s;
}

double CpuUsage::machine_busy_s() const {
  double busy = 0;
  for (const CpuTimes& c : cpus) busy += c.user + c.kernel;
  return busy;
}

double CpuUsage::others_s() const { return std::max(0.0, machine_busy_s() - process_s()); }

double CpuUsage::capacity_s() const { return wall_s * double(std::max<size_t>(cpus.size(), 1)); }

void CpuUsage::Merge(const CpuUsage& o) {
  wall_s += o.wall_s;
  process_user_s += o.process_user_s;
  process_kernel_s += o.process_kernel_s;
  if (o.threads_s >= 0) threads_s = std::max(0.0, threads_s) + o.threads_s;
  uring_workers_s += o.uring_workers_s;
  engine_s += o.engine_s;
  sampled = sampled || o.sampled;
  if (sampling_error.empty()) sampling_error = o.sampling_error;
  load_average = std::max(load_average, o.load_average);
  if (cpus.size() < o.cpus.size()) cpus.resize(o.cpus.size());
  for (size_t i = 0; i < o.cpus.size(); ++i) {
    cpus[i].user += o.cpus[i].user;
    cpus[i].kernel += o.cpus[i].kernel;
    cpus[i].idle += o.cpus[i].idle;
    cpus[i].steal += o.cpus[i].steal;
  }
}

}  // namespace vstack::bench
