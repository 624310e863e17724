// The kvm-vs-hyperv preset tables (report.h): each guest in diskspd's layout (CPU, Total IO,
// percentiles in ms) with the published output beside vstack's, the KVM / Hyper-V ratios, the
// attribution and the prediction. Only renders bench::KvmHypervReport.
#include <fmt/format.h>

#include <cmath>

#include "bench/report/report.h"
#include "bench/workload/kvm_hyperv_report.h"
#include "lib/text_table.h"

namespace vstack::bench {
namespace {

using nlohmann::json;

std::string Ms(double ms) { return ms < 0 ? std::string("N/A") : fmt::format("{:.3f}", ms); }
std::string TwoDecimalPct(double pct) { return fmt::format("{:.2f}%", pct); }
std::string Diff(double measured, double published) {
  return published > 0 && measured >= 0 ? fmt::format("{:+.1f}%", (measured / published - 1) * 100)
                                        : std::string("");
}

std::string GuestText(const PublishedDiskspd& p, const DiskspdMeasured& m, int rounds) {
  std::string out = fmt::format("\n  {} (stack {}", p.guest, p.stack);
  if (m.runs == 0) return out + "): not measured\n";
  out += fmt::format(", round {} of {}, the one closest to the median IOPS; published: {:.0f} s)\n\n",
                     m.round + 1, rounds, p.seconds);
  TextTable cpu({"CPU", "Usage", "User", "Kernel", "Idle", "published Usage", "User", "Kernel"},
                std::vector<bool>(8, true));
  for (size_t i = 0; i < m.vcpu_pct.size(); ++i) {
    cpu.AddRow({std::to_string(i), TwoDecimalPct(m.vcpu_pct[i]), "-", "-",
                TwoDecimalPct(100 - m.vcpu_pct[i])});
  }
  cpu.AddRule();
  cpu.AddRow({"avg.", TwoDecimalPct(m.cpu_pct), "-", "-", TwoDecimalPct(100 - m.cpu_pct),
              TwoDecimalPct(p.cpu_usage_pct), TwoDecimalPct(p.cpu_user_pct),
              TwoDecimalPct(p.cpu_kernel_pct)});
  out += cpu.Render("  ");
  out += "  (the guest's vCPUs: the CPU hv: held on each; vstack models one cost per I/O, not "
         "split into user and kernel)\n\n  Total IO\n";
  TextTable io({"thread", "bytes", "I/Os", "MiB/s", "I/O per s", "AvgLat", "LatStdDev"},
               std::vector<bool>(7, true));
  auto row = [&](const std::string& name, const DiskspdMeasured::Io& x) {
    io.AddRow({name, Num(x.bytes), Num(x.ios), Num(x.mib_s, 2), Num(x.iops, 2), Ms(x.avg_ms),
               Ms(x.stddev_ms)});
  };
  for (size_t i = 0; i < m.threads.size(); ++i) row(std::to_string(i), m.threads[i]);
  io.AddRule();
  row("total:", m.total);
  io.AddRow({"published:", Num(p.iops * p.seconds * 8192), Num(p.iops * p.seconds),
             Num(p.mib_s, 2), Num(p.iops, 2), Ms(p.avg_ms), p.stddev_ms < 0 ? "-" : Ms(p.stddev_ms)});
  io.AddRow({"difference:", "", "", Diff(m.total.mib_s, p.mib_s), Diff(m.total.iops, p.iops),
             Diff(m.total.avg_ms, p.avg_ms), Diff(m.total.stddev_ms, p.stddev_ms)});
  out += io.Render("  ");
  out += "\n";
  TextTable pct({"%-ile", "Read (ms)", "Write (ms)", "Total (ms)", "published Total (ms)",
                 "difference"},
                std::vector<bool>(6, true));
  for (const DiskspdMeasured::Percentile& x : m.percentiles) {
    const double pub = x.row == "min" ? -1 : p.Percentile(x.row);
    // N-nines is the rank ios x 10^-N from the top: below one I/O it is the max, repeated.
    const bool nines = x.row.find("-nines") != std::string::npos;
    if (nines && pub < 0 && m.total.ios * std::pow(10.0, -(x.row[0] - '0')) < 1) continue;
    pct.AddRow({x.row, Ms(x.read_ms), Ms(x.write_ms), Ms(x.total_ms), pub < 0 ? "-" : Ms(pub),
                Diff(x.total_ms, pub)});
  }
  out += pct.Render("  ");
  return out;
}

}  // namespace

std::string KvmHypervText(const BenchReport& r) {
  const KvmHypervReport k = bench::MakeKvmHypervReport(r.result);
  const auto& pub = bench::PublishedKvmHyperv();
  const int rounds = r.result.rounds_done;
  std::string out = fmt::format(
      "\nPreset 'kvm-vs-hyperv': diskspd {} in a KVM virtio and a Hyper-V gen 2 guest (2 vCPU "
      "each)\n  run as the preset's knobs for {:g} s (published: 300 s); the stalls are the "
      "published ones in strata of {:g}/300 (docs/presets.md)\n",
      bench::kKvmHypervDiskspd, k.seconds, k.seconds);
  for (int i = 0; i < 2; ++i) out += GuestText(pub[i], k.guest[i], rounds);

  out += "\n  KVM / Hyper-V (measured: geometric mean of the paired per-round ratios, 95% "
         "interval)\n";
  TextTable ratios({"", "published", "measured", "within published +-10%"},
                   {false, true, true, false});
  for (const bench::GuestRatio& x : k.ratios) {
    ratios.AddRow({x.metric, fmt::format("{:.3f}x", x.published), bench::DescribeRatio(x.measured),
                   x.inside ? "yes" : "no"});
  }
  out += ratios.Render("  ");

  out += "\n  Attribution (the layers' own counters, every round):\n";
  for (const std::string& a : k.attribution) out += "    " + a + "\n";

  out += "\n  Prediction: the same two guest costs (hv: CPU per I/O on 2 vCPUs) on faster devices, "
         "32 I/Os in flight\n";
  TextTable pred({"device", "KVM model IOPS", "measured", "CPU", "Hyper-V model IOPS", "measured",
                  "CPU", "KVM / Hyper-V"},
                 {false, true, true, true, true, true, true, true});
  for (const bench::GuestPrediction& p : k.predictions) {
    auto measured = [&](int i) { return p.measured ? Num(p.measured_iops[i]) : std::string("-"); };
    auto cpu = [&](int i) { return p.measured ? TwoDecimalPct(p.cpu_pct[i]) : std::string("-"); };
    pred.AddRow({p.device, Num(p.model_iops[0]), measured(0), cpu(0), Num(p.model_iops[1]),
                 measured(1), cpu(1),
                 fmt::format("{:.3f}x model{}", p.model_iops[0] / p.model_iops[1],
                             p.measured && p.measured_iops[1] > 0
                                 ? fmt::format(", {:.3f}x measured",
                                               p.measured_iops[0] / p.measured_iops[1])
                                 : "")});
  }
  out += pred.Render("  ");
  out += fmt::format(
      "  Crossover: KVM is CPU-bound at 2 vCPUs / {:.1f} us = {} IOPS, reached on any device "
      "faster than {:.2f} ms per I/O (32 in flight); Hyper-V at {} IOPS, below {:.3f} ms. On "
      "slower devices both are latency-bound and the faster disk wins, as in the source; on "
      "faster ones Hyper-V's 11x lower CPU per I/O does.\n",
      k.calibration[0].cpu_us, Num(k.cpu_bound_iops[0]), k.crossover_device_ms[0],
      Num(k.cpu_bound_iops[1]), k.crossover_device_ms[1]);

  out += "\n  Calibration (parameter <- published number):\n";
  for (int i = 0; i < 2; ++i) {
    const bench::GuestCalibration& c = k.calibration[i];
    std::string stalls, run;
    for (double s : c.stalls_s) stalls += (stalls.empty() ? "" : " ") + fmt::format("{:.3g}", s);
    for (double s : c.run_stalls_s) run += (run.empty() ? "" : " ") + fmt::format("{:.3g}", s);
    out += fmt::format(
        "    {}: {} I/Os in flight <- {:.2f} IOPS x {:.3f} ms; hv: cpu {:.2f} us <- {:.2f}% x 2 "
        "vCPUs / {:.2f} IOPS\n      stalls of the 300 s ({:.1f}% of it) <- the 5-, 4-, 3-nines: "
        "{} s; played in {:g} s as {} s\n      table mean {:.3f} ms <- Little's law on the "
        "unstalled time, less the CPU; its top {:.1f} ms solved for it; 0th percentile {:g} ms "
        "assumed\n      {}+{}\n",
        pub[i].guest, Num(c.in_flight, 2), pub[i].iops, pub[i].avg_ms, c.cpu_us,
        pub[i].cpu_usage_pct, pub[i].iops, c.stalled_share * 100, stalls, c.seconds, run,
        c.table_mean_ms, c.table_ms.back().second, bench::kAssumedMinMs, c.hv_spec, c.delay_spec);
  }
  return out;
}

json KvmHypervJson(const BenchReport& r) {
  const KvmHypervReport k = bench::MakeKvmHypervReport(r.result);
  const auto& pub = bench::PublishedKvmHyperv();
  json guests = json::array();
  for (int i = 0; i < 2; ++i) {
    const DiskspdMeasured& m = k.guest[i];
    json pct = json::object();
    for (const DiskspdMeasured::Percentile& x : m.percentiles) {
      pct[x.row] = {{"vstack_ms", x.total_ms < 0 ? json(nullptr) : json(x.total_ms)},
                    {"published_ms", pub[i].Percentile(x.row) < 0 ? json(nullptr)
                                                                  : json(pub[i].Percentile(x.row))}};
    }
    guests.push_back(
        {{"guest", pub[i].guest},
         {"stack", pub[i].stack},
         {"published", {{"iops", pub[i].iops}, {"mib_s", pub[i].mib_s}, {"avg_ms", pub[i].avg_ms},
                        {"stddev_ms", pub[i].stddev_ms < 0 ? json(nullptr) : json(pub[i].stddev_ms)},
                        {"cpu_pct", pub[i].cpu_usage_pct}}},
         {"vstack", {{"iops", m.iops}, {"avg_ms", m.avg_ms}, {"cpu_pct", m.cpu_pct_median},
                     {"shown_round", m.round}, {"mib_s", m.total.mib_s},
                     {"stddev_ms", m.total.stddev_ms}, {"disk_ms_per_io", m.disk_ms_per_io},
                     {"stall_ms_per_io", m.stall_ms_per_io}, {"cpu_us_per_io", m.cpu_us_per_io}}},
         {"percentiles", pct},
         {"calibration", {{"hv", k.calibration[i].hv_spec}, {"delay", k.calibration[i].delay_spec}}}});
  }
  json ratios = json::array();
  for (const bench::GuestRatio& x : k.ratios) {
    ratios.push_back({{"metric", x.metric}, {"published", x.published},
                      {"measured", x.measured.estimate}, {"low", x.measured.low},
                      {"high", x.measured.high}, {"within_10pct", x.inside}});
  }
  json pred = json::array();
  for (const bench::GuestPrediction& p : k.predictions) {
    pred.push_back({{"device", p.device},
                    {"model_iops", {p.model_iops[0], p.model_iops[1]}},
                    {"measured_iops", {p.measured_iops[0], p.measured_iops[1]}}});
  }
  return {{"preset", "kvm-vs-hyperv"}, {"seconds", k.seconds}, {"guests", guests},
          {"ratios", ratios}, {"predictions", pred}, {"attribution", k.attribution},
          {"cpu_bound_iops", {k.cpu_bound_iops[0], k.cpu_bound_iops[1]}},
          {"crossover_device_ms", {k.crossover_device_ms[0], k.crossover_device_ms[1]}}};
}

}  // namespace vstack::bench
