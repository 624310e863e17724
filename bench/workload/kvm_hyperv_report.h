// What the kvm-vs-hyperv preset reports (kvm_hyperv.h): each guest as vstack measured it, in
// diskspd's terms (its CPU, Total IO and percentile tables), next to the published output; the
// KVM / Hyper-V ratios, published and measured with 95% intervals; the attribution from the
// layers' own counters; and the prediction on faster devices. The text and JSON reports print
// this; nothing here formats.
#ifndef VSTACK_BENCH_WORKLOAD_KVM_HYPERV_REPORT_H_
#define VSTACK_BENCH_WORKLOAD_KVM_HYPERV_REPORT_H_

#include <string>
#include <vector>

#include "bench/workload/kvm_hyperv.h"
#include "bench/workload/matrix.h"
#include "bench/workload/paired_stats.h"

namespace vstack::bench {

// One guest's stack as diskspd would print it.
struct DiskspdMeasured {
  std::string stack;
  int runs = 0;      // rounds measured
  int round = -1;    // the round shown (0-based): the one closest to the median IOPS
  double seconds = 0;
  struct Io {
    double bytes = 0, ios = 0, mib_s = 0, iops = 0, avg_ms = 0, stddev_ms = 0;
  };
  std::vector<Io> threads;  // the shown round, thread by thread
  Io total;
  std::vector<double> vcpu_pct;  // the guest CPU hv: held on each vCPU, % of the window
  double cpu_pct = 0;            // their average (diskspd's avg. row)
  // min, 25th ... 9-nines, max in ms; < 0 where there is no sample.
  struct Percentile {
    std::string row;
    double read_ms = -1, write_ms = -1, total_ms = -1;
  };
  std::vector<Percentile> percentiles;
  // Every round, in round order (0 where the round did not run): what the ratios pair.
  std::vector<double> round_iops, round_avg_ms, round_cpu_pct;
  // Medians over the rounds.
  double iops = 0, avg_ms = 0, cpu_pct_median = 0;
  // From the layers' counters over every round, per I/O: the disk's time (delay: service,
  // stalls included) and the stalls' share of it, the guest CPU (hv:), and the stalls.
  double disk_ms_per_io = 0, stall_ms_per_io = 0, cpu_us_per_io = 0;
  double held_per_million = 0;  // requests a stall held, per million I/Os
};

// A KVM / Hyper-V ratio.
struct GuestRatio {
  std::string metric;  // "IOPS", "avg latency", "CPU"
  double published = 0;
  RatioInterval measured;  // per round, paired
  bool inside = false;     // the estimate is within the published value +-10%
};

// The same two guest costs on a faster device: the model's and the measured IOPS.
struct GuestPrediction {
  std::string device;  // "NVMe-like, 80 us", "memory speed"
  double device_ms = 0;
  double model_iops[2] = {}, measured_iops[2] = {}, cpu_pct[2] = {}, avg_ms[2] = {};
  bool measured = false;
};

struct KvmHypervReport {
  double seconds = 0;
  GuestCalibration calibration[2];  // KVM, Hyper-V
  DiskspdMeasured guest[2];
  std::vector<GuestRatio> ratios;
  std::vector<GuestPrediction> predictions;
  double cpu_bound_iops[2] = {};      // vCPUs / CPU per I/O
  double crossover_device_ms[2] = {}; // a device faster than this makes the guest CPU-bound
  std::vector<std::string> attribution;  // sentences, from the measured figures
};

KvmHypervReport MakeKvmHypervReport(const MatrixResult& m);

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_KVM_HYPERV_REPORT_H_
