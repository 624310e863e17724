#include "bench/workload/kvm_hyperv_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/workload/summary.h"

namespace vstack::bench {
namespace {

// diskspd's percentile rows between min and max.
constexpr struct {
  const char* row;
  double pct;
} kRows[] = {{"25th", 25},          {"50th", 50},          {"75th", 75},
             {"90th", 90},          {"95th", 95},          {"99th", 99},
             {"3-nines", 99.9},     {"4-nines", 99.99},    {"5-nines", 99.999},
             {"6-nines", 99.9999},  {"7-nines", 99.99999}, {"8-nines", 99.999999},
             {"9-nines", 99.9999999}};

const StackOutcome* FindStack(const MatrixResult& m, const std::string& name) {
  for (const StackOutcome& s : m.stacks) {
    if (s.plan.name == name) return &s;
  }
  return nullptr;
}

const LayerDelta* FindLayer(const RunResult& r, const std::string& kind) {
  for (const LayerDelta& l : r.layers) {
    if (l.kind == kind) return &l;
  }
  return nullptr;
}

uint64_t Counter(const LayerDelta* l, const std::string& name) {
  if (l == nullptr) return 0;
  for (size_t i = 0; i < l->counter_names.size() && i < l->counters.size(); ++i) {
    if (l->counter_names[i] == name) return l->counters[i];
  }
  return 0;
}

// The guest CPU hv: held, as % of each vCPU's time in the window.
std::vector<double> VcpuPct(const RunResult& r) {
  std::vector<double> out;
  const LayerDelta* hv = FindLayer(r, "hv");
  for (int i = 0; hv != nullptr && r.seconds > 0; ++i) {
    const std::string name = "vcpu" + std::to_string(i) + "_ns";
    if (std::find(hv->counter_names.begin(), hv->counter_names.end(), name) ==
        hv->counter_names.end()) {
      break;
    }
    out.push_back(double(Counter(hv, name)) / 1e9 / r.seconds * 100);
  }
  return out;
}

double Average(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / double(v.size());
}

DiskspdMeasured::Io IoOf(const OpTotals& t, double seconds) {
  DiskspdMeasured::Io io;
  io.bytes = double(t.bytes);
  io.ios = double(t.ios);
  if (seconds > 0) {
    io.mib_s = io.bytes / 1048576 / seconds;
    io.iops = io.ios / seconds;
  }
  io.avg_ms = t.latency.mean() / 1e6;
  io.stddev_ms = t.latency.stddev() / 1e6;
  return io;
}

double Ms(const LatencyHistogram& h, double pct) {
  return h.count() ? double(h.Percentile(pct)) / 1e6 : -1;
}

DiskspdMeasured Measure(const StackOutcome* s, int rounds) {
  DiskspdMeasured d;
  if (s == nullptr) return d;
  d.stack = s->plan.name;
  d.round_iops.assign(rounds, 0);
  d.round_avg_ms.assign(rounds, 0);
  d.round_cpu_pct.assign(rounds, 0);
  std::vector<double> iops;
  double ios = 0, disk_ns = 0, stall_ns = 0, cpu_ns = 0, held = 0;
  for (const RunResult& r : s->rounds) {
    const OpTotals t = r.Total();
    if (t.ios == 0 || r.seconds <= 0 || r.round >= rounds) continue;
    ++d.runs;
    d.round_iops[r.round] = double(t.ios) / r.seconds;
    d.round_avg_ms[r.round] = t.latency.mean() / 1e6;
    d.round_cpu_pct[r.round] = Average(VcpuPct(r));
    iops.push_back(d.round_iops[r.round]);
    ios += double(t.ios);
    const LayerDelta* delay = FindLayer(r, "delay");
    disk_ns += double(Counter(delay, "service_ns"));
    stall_ns += double(Counter(delay, "stall_ns"));
    held += double(Counter(delay, "stalled"));
    cpu_ns += double(Counter(FindLayer(r, "hv"), "cpu_ns"));
  }
  if (d.runs == 0) return d;
  const Spread spread = SpreadOf(iops);
  d.iops = spread.median;
  std::vector<double> avg, cpu;
  double best = INFINITY;
  for (const RunResult& r : s->rounds) {
    if (r.round >= rounds || d.round_iops[r.round] == 0) continue;
    avg.push_back(d.round_avg_ms[r.round]);
    cpu.push_back(d.round_cpu_pct[r.round]);
    if (std::abs(d.round_iops[r.round] - spread.median) < best) {
      best = std::abs(d.round_iops[r.round] - spread.median);
      d.round = r.round;
    }
  }
  d.avg_ms = SpreadOf(avg).median;
  d.cpu_pct_median = SpreadOf(cpu).median;
  d.disk_ms_per_io = disk_ns / ios / 1e6;
  d.stall_ms_per_io = stall_ns / ios / 1e6;
  d.cpu_us_per_io = cpu_ns / ios / 1e3;
  d.held_per_million = held / ios * 1e6;

  const RunResult* shown = nullptr;
  for (const RunResult& r : s->rounds) {
    if (r.round == d.round) shown = &r;
  }
  d.seconds = shown->seconds;
  OpTotals read, write, total;
  for (const ThreadResult& t : shown->threads) {
    d.threads.push_back(IoOf(t.Total(), shown->seconds));
    read.Merge(t.read);
    write.Merge(t.write);
  }
  total = read;
  total.Merge(write);
  d.total = IoOf(total, shown->seconds);
  d.vcpu_pct = VcpuPct(*shown);
  d.cpu_pct = Average(d.vcpu_pct);
  auto min_ms = [](const LatencyHistogram& h) { return h.count() ? double(h.min()) / 1e6 : -1; };
  auto max_ms = [](const LatencyHistogram& h) { return h.count() ? double(h.max()) / 1e6 : -1; };
  d.percentiles.push_back({"min", min_ms(read.latency), min_ms(write.latency), min_ms(total.latency)});
  for (const auto& row : kRows) {
    d.percentiles.push_back({row.row, Ms(read.latency, row.pct), Ms(write.latency, row.pct),
                             Ms(total.latency, row.pct)});
  }
  d.percentiles.push_back({"max", max_ms(read.latency), max_ms(write.latency), max_ms(total.latency)});
  return d;
}

GuestRatio Ratio(const char* metric, double published, const std::vector<double>& kvm,
                 const std::vector<double>& hyperv) {
  GuestRatio r;
  r.metric = metric;
  r.published = published;
  r.measured = PairedRatio(RoundRatios(kvm, hyperv));
  r.inside = r.measured.n > 0 && std::abs(r.measured.estimate / published - 1) <= 0.10;
  return r;
}

template <typename... Args>
std::string Format(const char* fmt, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

void Attribute(KvmHypervReport* r) {
  const DiskspdMeasured& k = r->guest[0];
  const DiskspdMeasured& h = r->guest[1];
  if (k.runs == 0 || h.runs == 0) return;
  const double in_flight = r->calibration[0].in_flight;
  r->attribution.push_back(Format(
      "IOPS are a latency gap (Little's law): with %.0f I/Os in flight, KVM's %.2f ms mean gives "
      "%.0f IOPS and Hyper-V's %.2f ms gives %.0f (measured: %.0f and %.0f). The disk is the "
      "gap: delay: answers KVM's I/Os in %.2f ms and Hyper-V's in %.2f ms, stalls included.",
      in_flight, k.avg_ms, in_flight / k.avg_ms * 1000, h.avg_ms, in_flight / h.avg_ms * 1000,
      k.iops, h.iops, k.disk_ms_per_io, h.disk_ms_per_io));
  r->attribution.push_back(Format(
      "The CPU is hv:'s: KVM's guest pays %.1f us of CPU per I/O (%.2f%% of 2 vCPUs), Hyper-V's "
      "%.1f us (%.2f%%), %.1fx as much per I/O; at %.0f IOPS that is 2 vCPUs x %.0f%% busy.",
      k.cpu_us_per_io, k.cpu_pct_median, h.cpu_us_per_io, h.cpu_pct_median,
      h.cpu_us_per_io > 0 ? k.cpu_us_per_io / h.cpu_us_per_io : 0, k.iops, k.cpu_pct_median));
  r->attribution.push_back(Format(
      "The tail is delay:'s stalls: they held %.0f of every million I/Os (KVM) and %.0f "
      "(Hyper-V), all that were in flight when each stall began (the top nines are their "
      "lengths), and add %.2f ms (%.0f%%) to KVM's mean, %.2f ms (%.0f%%) to Hyper-V's.",
      k.held_per_million, h.held_per_million, k.stall_ms_per_io,
      k.avg_ms > 0 ? k.stall_ms_per_io / k.avg_ms * 100 : 0, h.stall_ms_per_io,
      h.avg_ms > 0 ? h.stall_ms_per_io / h.avg_ms * 100 : 0));
}

}  // namespace

KvmHypervReport MakeKvmHypervReport(const MatrixResult& m) {
  KvmHypervReport r;
  r.seconds = m.knobs.duration_s;
  const auto& published = PublishedKvmHyperv();
  const int rounds = std::max(m.rounds_done, 1);
  for (int i = 0; i < 2; ++i) {
    r.calibration[i] = CalibrateGuest(published[i], r.seconds);
    r.guest[i] = Measure(FindStack(m, published[i].stack), rounds);
    r.cpu_bound_iops[i] = published[i].vcpus / (r.calibration[i].cpu_us / 1e6);
    // in_flight / (device + cpu) = vcpus / cpu  <=>  device = cpu x (in_flight / vcpus - 1)
    r.crossover_device_ms[i] =
        r.calibration[i].cpu_us / 1000 * (r.calibration[i].in_flight / published[i].vcpus - 1);
  }
  const DiskspdMeasured& k = r.guest[0];
  const DiskspdMeasured& h = r.guest[1];
  r.ratios = {Ratio("IOPS", published[0].iops / published[1].iops, k.round_iops, h.round_iops),
              Ratio("avg latency", published[0].avg_ms / published[1].avg_ms, k.round_avg_ms,
                    h.round_avg_ms),
              Ratio("CPU", published[0].cpu_usage_pct / published[1].cpu_usage_pct,
                    k.round_cpu_pct, h.round_cpu_pct)};
  const struct {
    const char* device;
    const char* suffix;
    double ms;
  } devices[] = {{"NVMe-like, 80 us", " nvme", 0.080}, {"memory speed", " memory", 0}};
  for (const auto& dev : devices) {
    GuestPrediction p;
    p.device = dev.device;
    p.device_ms = dev.ms;
    for (int i = 0; i < 2; ++i) {
      const GuestCalibration& c = r.calibration[i];
      p.model_iops[i] =
          std::min(c.in_flight / (dev.ms + c.cpu_us / 1000) * 1000, r.cpu_bound_iops[i]);
      const DiskspdMeasured g = Measure(FindStack(m, published[i].stack + dev.suffix), rounds);
      p.measured = p.measured || g.runs > 0;
      p.measured_iops[i] = g.iops;
      p.cpu_pct[i] = g.cpu_pct_median;
      p.avg_ms[i] = g.avg_ms;
    }
    r.predictions.push_back(p);
  }
  Attribute(&r);
  return r;
}

}  // namespace vstack::bench
