// The kvm-vs-hyperv preset: two Windows guests (2 vCPU) running the same diskspd line on KVM
// (virtio) and on Hyper-V (gen 2), calibrated from the published diskspd outputs. Each guest is
// `hv:` (its CPU per I/O, held on 2 modelled vCPUs) over `delay:` (the virtual disk as the guest
// sees it: its service-time percentile table and its stalls) over `null`. Every parameter is
// derived here from a published number (GuestCalibration says which); docs/presets.md section 5.
#ifndef VSTACK_BENCH_WORKLOAD_KVM_HYPERV_H_
#define VSTACK_BENCH_WORKLOAD_KVM_HYPERV_H_

#include <string>
#include <utility>
#include <vector>

namespace vstack::bench {

// One guest's published diskspd output (the totals; the source gives no per-thread, read or
// write columns, and no minimum).
struct PublishedDiskspd {
  std::string guest;  // "KVM virtio"
  std::string stack;  // the plan that models it
  double seconds = 300;
  double iops = 0, mib_s = 0, avg_ms = 0;
  double stddev_ms = -1;  // < 0: not published
  int vcpus = 2;
  double cpu_usage_pct = 0, cpu_user_pct = 0, cpu_kernel_pct = 0;  // avg. of the vCPUs
  // "25th" ... "5-nines", "max": the Total (ms) column of the percentile table.
  std::vector<std::pair<std::string, double>> percentiles_ms;
  double Percentile(const std::string& row) const;  // < 0 when not published
};

// The preset's diskspd line, as the source ran it.
inline constexpr const char* kKvmHypervDiskspd = "-b8K -d300 -h -L -o8 -t4 -r -w50 -c10G";
// The run length the preset uses unless --duration is given, and its prediction runs.
inline constexpr double kKvmHypervDefaultSeconds = 60;
inline constexpr double kKvmHypervPredictionSeconds = 10;

const std::vector<PublishedDiskspd>& PublishedKvmHyperv();  // KVM, then Hyper-V

// How one guest's stack follows from its published output, for a run of `seconds`.
struct GuestCalibration {
  const PublishedDiskspd* published = nullptr;
  double in_flight = 0;  // Little's law: IOPS x avg latency (32 for diskspd -o8 -t4)
  double cpu_us = 0;     // usage% x vCPUs / IOPS: the guest CPU per I/O (hv: cpu)
  // The stalls of the published 300 s: one per group of `in_flight` I/Os above the 3-nines,
  // anchored at the 5-, 4- and 3-nines, geometric in between (seconds, longest first).
  std::vector<double> stalls_s;
  double stalled_share = 0;  // their sum over 300 s
  std::vector<double> run_stalls_s;  // the same for a run of `seconds` (strata, see .cc)
  double seconds = 0;                // the run (and stall period) length
  // The service-time table of the I/Os no stall holds: (percentile, ms) from 0 to 100.
  std::vector<std::pair<double, double>> table_ms;
  double table_mean_ms = 0;  // its mean: the published mean less stalls and CPU (Little)
  std::string hv_spec, delay_spec;  // "hv:cpu=...,vcpus=2", "delay:latency=pct:...,stalls=..."
};
GuestCalibration CalibrateGuest(const PublishedDiskspd& p, double seconds);

// The assumption behind the table's 0th percentile (the source publishes no minimum).
inline constexpr double kAssumedMinMs = 1.0;

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_KVM_HYPERV_H_
