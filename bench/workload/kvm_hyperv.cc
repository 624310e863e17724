#include "bench/workload/kvm_hyperv.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "blockdev/emulation/service_time.h"

namespace vstack::bench {
namespace {

PublishedDiskspd Guest(const char* guest, const char* stack, double iops, double mib_s,
                       double avg_ms, double stddev_ms, double usage_pct, double kernel_pct,
                       std::vector<double> percentiles_ms) {
  PublishedDiskspd p;
  p.guest = guest;
  p.stack = stack;
  p.iops = iops;
  p.mib_s = mib_s;
  p.avg_ms = avg_ms;
  p.stddev_ms = stddev_ms;
  p.cpu_usage_pct = usage_pct;
  p.cpu_kernel_pct = kernel_pct;
  p.cpu_user_pct = usage_pct - kernel_pct;
  const char* rows[] = {"25th", "50th",    "75th",    "90th",    "95th",
                        "99th", "3-nines", "4-nines", "5-nines", "max"};
  for (size_t i = 0; i < percentiles_ms.size(); ++i) p.percentiles_ms.emplace_back(rows[i], percentiles_ms[i]);
  return p;
}

// The two published diskspd outputs (Windows Server 2012 R2 guests, 2 vCPU, 4 GB each); the
// source gives no stddev for Hyper-V.
std::vector<PublishedDiskspd> MakePublished() {
  return {Guest("KVM virtio", "kvm-virtio", 1977.23, 15.45, 16.144, 319.1, 27.20, 24.55,
                {4.440, 6.572, 9.138, 27.545, 43.411, 77.176, 263.2, 8655.9, 38312.4, 38315.2}),
          Guest("Hyper-V gen 2", "hyperv-gen2", 1000.57, 7.82, 32.063, -1, 1.22, 1.03,
                {6.820, 24.479, 41.861, 56.938, 79.119, 196.786, 869.0, 2448.8, 2619.7, 2642.3})};
}

std::string Ms(double ms) { return FormatDurationNs(ms * 1e6); }

// "pct:0=1ms/25.03=4.16ms/..." for a (percentile, ms) table: delay:'s distribution.
std::string TableSpec(const std::vector<std::pair<double, double>>& table_ms) {
  std::string out = "pct:";
  for (const auto& [pct, ms] : table_ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.6g=", out.size() > 4 ? "/" : "", pct);
    out += buf + Ms(ms);
  }
  return out;
}

// The table's mean in ms, as delay: draws it.
double TableMean(const std::vector<std::pair<double, double>>& table_ms) {
  return ServiceTime::Parse("table", TableSpec(table_ms)).value().mean_ns() / 1e6;
}


// The stalls of the published run. The I/Os above the 3-nines come in groups of `in_flight`:
// a stalled disk holds every request in flight, and each completes at the stall's end (the
// source's 5-nines and max differ by 0.01% for KVM, 1% for Hyper-V). So the run had
// ceil(I/Os above the 3-nines / in_flight) stalls; a stall whose group holds the rank of a
// published top percentile lasts that percentile (the lowest one if several), and the
// stalls between two such anchors shorten geometrically from one to the next.
std::vector<double> PublishedStalls(const PublishedDiskspd& p, double in_flight) {
  const double ios = p.iops * p.seconds;
  const int per = static_cast<int>(std::lround(in_flight));
  auto group = [&](double fraction) {
    return std::max(1, static_cast<int>(std::ceil(ios * fraction / per)));
  };
  const int n = group(1e-3);
  std::vector<double> len(n + 1, -1);  // 1-based
  const std::pair<double, const char*> anchors[] = {
      {1e-5, "5-nines"}, {1e-4, "4-nines"}, {1e-3, "3-nines"}};
  for (const auto& [fraction, row] : anchors) {
    const int g = group(fraction);
    const double s = p.Percentile(row) / 1000;
    len[g] = len[g] < 0 ? s : std::min(len[g], s);
  }
  int last = 1;
  for (int g = 2; g <= n; ++g) {
    if (len[g] < 0) continue;
    for (int k = last + 1; k < g; ++k) {
      len[k] = len[last] * std::pow(len[g] / len[last], double(k - last) / (g - last));
    }
    last = g;
  }
  return std::vector<double>(len.begin() + 1, len.end());
}

// A run of `seconds` keeps the stalled share of time and the share of I/Os stalls hold: the
// 300 s list is cut into round(n x seconds / 300) strata of consecutive stalls (by length),
// each played as one stall that lasts its stratum's total x seconds / 300. At 300 s this is the
// published list; shorter, the longest stalls are averaged with their neighbours.
std::vector<double> RunStalls(const std::vector<double>& stalls, double seconds, double published_s) {
  const double scale = seconds / published_s;
  const size_t n = stalls.size();
  const size_t m = std::clamp<size_t>(static_cast<size_t>(std::lround(double(n) * scale)), 1, n);
  std::vector<double> out;
  for (size_t j = 0; j < m; ++j) {
    double sum = 0;
    for (size_t g = j * n / m; g < (j + 1) * n / m; ++g) sum += stalls[g];
    out.push_back(sum * scale);
  }
  return out;
}

}  // namespace

double PublishedDiskspd::Percentile(const std::string& row) const {
  for (const auto& [name, ms] : percentiles_ms) {
    if (name == row) return ms;
  }
  return -1;
}

const std::vector<PublishedDiskspd>& PublishedKvmHyperv() {
  static const std::vector<PublishedDiskspd> published = MakePublished();
  return published;
}

GuestCalibration CalibrateGuest(const PublishedDiskspd& p, double seconds) {
  GuestCalibration c;
  c.published = &p;
  c.seconds = seconds;
  c.in_flight = p.iops * p.avg_ms / 1000;
  c.cpu_us = p.cpu_usage_pct / 100 * p.vcpus / p.iops * 1e6;
  c.stalls_s = PublishedStalls(p, c.in_flight);
  double stalled = 0;
  for (double s : c.stalls_s) stalled += s;
  c.stalled_share = stalled / p.seconds;
  c.run_stalls_s = RunStalls(c.stalls_s, seconds, p.seconds);

  // The I/Os no stall holds: Little's law over the time the disk was not stalled gives their
  // mean, less the CPU each paid before it reached the disk.
  const double ios = p.iops * p.seconds;
  const double held = double(c.stalls_s.size()) * std::lround(c.in_flight);
  const double free_mean_ms = c.in_flight * (p.seconds - stalled) / (ios - held) * 1000;
  c.table_mean_ms = free_mean_ms - c.cpu_us / 1000;
  // The table: the published percentiles less the CPU, at the ranks they have among the free
  // I/Os (the held ones are all above the 3-nines), from the assumed minimum to a top value
  // solved so that the table's mean is the one Little's law asks for.
  const double free_share = 1 - held / ios;
  c.table_ms = {{0, kAssumedMinMs}};
  for (const char* row : {"25th", "50th", "75th", "90th", "95th", "99th"}) {
    const double pct = std::atof(row) / free_share;
    c.table_ms.emplace_back(std::min(pct, 99.999), p.Percentile(row) - c.cpu_us / 1000);
  }
  double lo = c.table_ms.back().second, hi = lo * 100;
  for (int i = 0; i < 100; ++i) {
    auto t = c.table_ms;
    t.emplace_back(100, (lo + hi) / 2);
    (TableMean(t) < c.table_mean_ms ? lo : hi) = (lo + hi) / 2;
  }
  c.table_ms.emplace_back(100, lo);

  c.hv_spec = "hv:cpu=" + FormatDurationNs(c.cpu_us * 1e3) + ",vcpus=" + std::to_string(p.vcpus);
  const std::string table = TableSpec(c.table_ms);
  std::string stalls;
  for (double s : c.run_stalls_s) stalls += (stalls.empty() ? "" : "/") + Ms(s * 1000);
  char period[32];
  std::snprintf(period, sizeof period, "%gs", seconds);
  c.delay_spec = "delay:latency=" + table + ",stalls=" + stalls + ",stall_period=" + period;
  return c;
}

}  // namespace vstack::bench
