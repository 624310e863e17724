#include "bench/workload/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace vstack::bench {
namespace {

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

double Median(std::vector<double> v) { return SpreadOf(std::move(v)).median; }

template <typename F>
double MedianOf(const std::vector<RunMetrics>& ms, F f) {
  std::vector<double> v;
  for (const RunMetrics& m : ms) v.push_back(f(m));
  return Median(v);
}

std::vector<AnchorSummary> SummarizeAnchors(const StackOutcome& o) {
  std::map<std::string, AnchorSummary> by_tool;
  std::vector<std::string> order;
  std::map<std::string, std::vector<const AnchorRun*>> runs;
  for (const AnchorRun& a : o.anchors) {
    if (!by_tool.count(a.tool)) order.push_back(a.tool);
    AnchorSummary& s = by_tool[a.tool];
    s.tool = a.tool;
    if (!a.error.empty()) {
      s.errors.push_back("round " + std::to_string(a.round + 1) + ": " + a.error);
      continue;
    }
    runs[a.tool].push_back(&a);
  }
  std::vector<AnchorSummary> out;
  for (const std::string& tool : order) {
    AnchorSummary s = by_tool[tool];
    std::vector<double> iops, mbps, p50, p99, cpu, ratio;
    for (const AnchorRun* a : runs[tool]) {
      const AnchorResult& r = a->result;
      iops.push_back(r.iops);
      mbps.push_back(r.mbps);
      if (r.p50_us >= 0) p50.push_back(r.p50_us);
      if (r.p99_us >= 0) p99.push_back(r.p99_us);
      if (r.cpu_s >= 0 && r.ios > 0) cpu.push_back(r.cpu_s / double(r.ios) * 1e6);
      for (const RunResult& v : o.rounds) {
        if (v.round == a->round && r.iops > 0) ratio.push_back(Metrics(v).iops / r.iops);
      }
      s.command = r.command;
      s.note = r.note;
    }
    s.runs = static_cast<int>(runs[tool].size());
    s.iops = SpreadOf(iops);
    s.mbps = Median(mbps);
    if (!p50.empty()) s.p50_us = Median(p50);
    if (!p99.empty()) s.p99_us = Median(p99);
    if (!cpu.empty()) s.cpu_us_per_io = Median(cpu);
    s.ratio = SpreadOf(ratio);
    out.push_back(std::move(s));
  }
  return out;
}

std::string Gap(const StackSummary& s, const StackSummary& base) {
  if (s.baseline) return "the baseline";
  if (s.runs == 0 || base.runs == 0) return "";
  const double ratio = s.iops_vs_base.median;
  std::string g = Fmt("%.3fx", ratio) + " the IOPS of " + base.name + " (" +
                  Fmt("%+.1f%%", (ratio - 1) * 100) + "), p50 " +
                  Fmt("%+.1f us", s.p50_us - base.p50_us) + ", p99 " +
                  Fmt("%+.1f us", s.p99_us - base.p99_us) + ", CPU per I/O " +
                  Fmt("%+.2f us", s.cpu_us_per_io - base.cpu_us_per_io) +
                  " (efficiency overhead " + Fmt("%.1f%%", s.overhead_vs_base * 100) + ").";
  const Attribution& a = s.attribution;
  const LayerCost* top = nullptr;
  for (const LayerCost& c : a.layers) {
    if (!c.backend && (top == nullptr || c.self_us_per_io > top->self_us_per_io)) top = &c;
  }
  if (top != nullptr && a.timed) {
    g += AttributionSentence(a, *top);
  }
  if (!a.layers.empty() && !base.attribution.layers.empty()) {
    const LayerCost& dev = a.layers.back();
    const LayerCost& bdev = base.attribution.layers.back();
    g += " The device below gets " + Fmt("%.2f", dev.in_total) + " requests per guest I/O (" +
         base.name + ": " + Fmt("%.2f", bdev.in_total) + ") and spends " +
         Fmt("%.1f us", dev.self_us_per_io) + " per guest I/O (" + base.name + ": " +
         Fmt("%.1f us", bdev.self_us_per_io) + ").";
  }
  return g;
}

}  // namespace

Spread SpreadOf(std::vector<double> v) {
  Spread s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min = v.front();
  s.max = v.back();
  return s;
}

MatrixSummary Summarize(const MatrixResult& m) {
  MatrixSummary out;
  std::map<int, double> base_iops;  // round -> baseline IOPS
  for (const StackOutcome& o : m.stacks) {
    StackSummary s;
    s.name = o.plan.name;
    s.spec = o.spec;
    s.chain = o.chain;
    s.note = o.plan.note;
    s.skipped = o.skipped;
    s.error = o.error;
    std::vector<RunMetrics> ms;
    std::vector<const RunResult*> measured;
    for (const RunResult& r : o.rounds) {
      if (r.interrupted) s.interrupted = true;
      if (r.Total().ios == 0) continue;
      ms.push_back(Metrics(r));
      measured.push_back(&r);
      s.latency.Merge(r.Total().latency);
    }
    s.runs = static_cast<int>(ms.size());
    if (s.runs > 0) {
      std::vector<double> iops, mbps;
      for (const RunMetrics& x : ms) {
        iops.push_back(x.iops);
        mbps.push_back(x.mbps);
      }
      s.iops = SpreadOf(iops);
      s.mbps = SpreadOf(mbps);
      // The round closest to the median IOPS, for the detailed tables.
      double best = INFINITY;
      for (size_t i = 0; i < ms.size(); ++i) {
        const double d = std::fabs(ms[i].iops - s.iops.median);
        if (d < best) {
          best = d;
          s.median_round = measured[i]->round;
        }
      }
      s.read_iops = MedianOf(ms, [](const RunMetrics& x) { return x.read_iops; });
      s.write_iops = MedianOf(ms, [](const RunMetrics& x) { return x.write_iops; });
      s.mean_us = MedianOf(ms, [](const RunMetrics& x) { return x.mean_us; });
      s.p50_us = MedianOf(ms, [](const RunMetrics& x) { return x.p50_us; });
      s.read_mean_us = MedianOf(ms, [](const RunMetrics& x) { return x.read_mean_us; });
      s.write_mean_us = MedianOf(ms, [](const RunMetrics& x) { return x.write_mean_us; });
      s.yields = MedianOf(ms, [](const RunMetrics& x) { return x.yields; });
      s.yield_wait_ms = MedianOf(ms, [](const RunMetrics& x) { return x.yield_wait_ms; });
      s.yield_max_wait_ms = MedianOf(ms, [](const RunMetrics& x) { return x.yield_max_wait_ms; });
      s.signal_wait_ms = MedianOf(ms, [](const RunMetrics& x) { return x.signal_wait_ms; });
      s.ready_stalled_pct = MedianOf(ms, [](const RunMetrics& x) { return x.ready_stalled_pct; });
      s.cpu_ready_pct = measured.front()->knobs.cpu_ready_pct;
      s.p99_us = MedianOf(ms, [](const RunMetrics& x) { return x.p99_us; });
      s.p999_us = MedianOf(ms, [](const RunMetrics& x) { return x.p999_us; });
      s.cpu_us_per_io = MedianOf(ms, [](const RunMetrics& x) { return x.cpu_us_per_io; });
      s.process_cpu_pct = MedianOf(ms, [](const RunMetrics& x) { return x.process_cpu_pct; });
      s.machine_cpu_pct = MedianOf(ms, [](const RunMetrics& x) { return x.machine_cpu_pct; });
      s.others_cpu_pct = MedianOf(ms, [](const RunMetrics& x) { return x.others_cpu_pct; });
      s.iops_per_cpu_s = MedianOf(ms, [](const RunMetrics& x) { return x.iops_per_cpu_s; });
      s.iops_per_cpu_pct = MedianOf(ms, [](const RunMetrics& x) { return x.iops_per_cpu_pct; });
      s.attribution = Attribute(MergeLayerDeltas(measured), MeasuredMeanUs(measured));
    }
    s.anchors = SummarizeAnchors(o);
    if (out.baseline.empty() && s.runs > 0) {
      s.baseline = true;
      out.baseline = s.name;
      for (const RunResult* r : measured) base_iops[r->round] = Metrics(*r).iops;
    }
    if (!out.baseline.empty() && s.runs > 0) {
      std::vector<double> ratio;
      for (const RunResult* r : measured) {
        auto it = base_iops.find(r->round);
        if (it != base_iops.end() && it->second > 0) ratio.push_back(Metrics(*r).iops / it->second);
      }
      s.iops_vs_base = SpreadOf(ratio);
    }
    out.stacks.push_back(std::move(s));
  }
  auto base = std::find_if(out.stacks.begin(), out.stacks.end(), [](auto& x) { return x.baseline; });
  if (base == out.stacks.end()) return out;
  const StackSummary b = *base;
  for (StackSummary& s : out.stacks) {
    s.overhead_vs_base = s.runs ? EfficiencyOverhead(b.iops_per_cpu_s, s.iops_per_cpu_s) : 0;
    s.gap = Gap(s, b);
  }
  return out;
}

}  // namespace vstack::bench
