#include "bench/workload/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace vstack::bench {
namespace {

double Ratio(double x, double base) { return x > 0 && base > 0 ? x / base : 0; }

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

// The median of the values that are known (>= 0); -1 when none is.
template <typename F>
double MedianOfKnown(const std::vector<RunMetrics>& ms, F f) {
  std::vector<double> v;
  for (const RunMetrics& m : ms) {
    if (f(m) >= 0) v.push_back(f(m));
  }
  return v.empty() ? -1 : Median(v);
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
    std::vector<double> iops, mib_s, p50, p99, cpu, ratio, vstack_ios, tool_ios;
    for (const AnchorRun* a : runs[tool]) {
      const AnchorResult& r = a->result;
      iops.push_back(r.iops);
      mib_s.push_back(r.mib_s);
      if (r.p50_us >= 0) p50.push_back(r.p50_us);
      if (r.p99_us >= 0) p99.push_back(r.p99_us);
      if (r.cpu_s >= 0 && r.ios > 0) cpu.push_back(r.cpu_s / double(r.ios) * 1e6);
      for (const RunResult& v : o.rounds) {
        if (v.round != a->round) continue;
        if (r.iops > 0) ratio.push_back(Metrics(v).iops / r.iops);
        vstack_ios.push_back(double(v.Total().ios));
      }
      tool_ios.push_back(double(r.ios));
      s.capped = s.capped || r.capped;
      s.command = r.command;
      s.note = r.note;
    }
    s.runs = static_cast<int>(runs[tool].size());
    s.iops = SpreadOf(iops);
    s.mib_s = Median(mib_s);
    if (!p50.empty()) s.p50_us = Median(p50);
    if (!p99.empty()) s.p99_us = Median(p99);
    if (!cpu.empty()) s.cpu_us_per_io = Median(cpu);
    s.ratio = SpreadOf(ratio);
    s.ratio_interval = PairedRatio(ratio);
    s.vstack_ios = Median(vstack_ios);
    s.tool_ios = Median(tool_ios);
    out.push_back(std::move(s));
  }
  return out;
}

// One comparison in words: "IOPS 0.982x (0.913-1.052), not significant".
std::string Compared(const std::string& what, const RatioInterval& r) {
  return what + " " + DescribeRatio(r);
}

std::string Gap(const StackSummary& s, const StackSummary& base) {
  if (s.baseline) return "the baseline";
  if (s.runs == 0 || base.runs == 0) return "";
  // Only a difference whose interval excludes "no change" is stated as a finding.
  const RatioInterval& eff = s.efficiency_ratio;
  std::string overhead;
  if (!eff.has_interval()) {
    overhead = "efficiency overhead " + Fmt("%.1f%%", s.overhead_vs_base * 100) +
               " (1 round, no interval)";
  } else {
    overhead = (eff.significant ? "efficiency overhead " + Fmt("%.1f%%", s.overhead_vs_base * 100)
                                : std::string("no significant efficiency overhead")) +
               " (" + Fmt("%.1f", (1 - eff.high) * 100) + " to " +
               Fmt("%.1f%%", (1 - eff.low) * 100) + ")";
  }
  const bool any = s.iops_ratio.significant || s.cpu_ratio.significant || eff.significant ||
                   s.p99_ratio.significant;
  std::string g = any || !s.iops_ratio.has_interval()
                      ? std::string()
                      : "no significant difference from " + base.name + " at this precision: ";
  g += Compared("IOPS", s.iops_ratio) + "; " + Compared("CPU per I/O", s.cpu_ratio) + "; " +
       Compared("p99", s.p99_ratio) + "; " + overhead + ".";
  const Attribution& a = s.attribution;
  g += AttributionSentence(a, s.cpu_ratio, base.name);
  g += DeviceSentence(a, base.attribution, base.name);
  return g;
}

}  // namespace

// Flushes the layers sent below on their own, per guest I/O: those the device got beyond the
// guest's. A FUA write counts as a write, though a device without FUA serves it as a write and
// a flush, so on such a device the layers' flushes are more than this says.
static double OwnFlushesPerIo(const Attribution& a) {
  constexpr int kFlush = static_cast<int>(Op::kFlush);
  return std::max(0.0, a.layers.back().in_per_io[kFlush] - a.layers.front().in_per_io[kFlush]);
}

static std::string OneIn(double per_io) {
  return per_io > 0 ? "one per " + Fmt("%.0f", 1 / per_io) + " guest I/Os" : std::string("none");
}

// The --flush-interval that gives a stack without flushes of its own as many flushes below as
// this stack's device got: the option flushes after every N writes of each thread, so the
// whole run flushes once per N guest writes. Without guest writes (none counted): the option
// alone.
static std::string MatchingFlushInterval(const Attribution& a) {
  constexpr int kFlush = static_cast<int>(Op::kFlush), kWrite = static_cast<int>(Op::kWrite);
  const double writes = a.layers.front().in_per_io[kWrite];
  const double flushes = a.layers.back().in_per_io[kFlush];
  if (writes <= 0 || flushes <= 0) return "--flush-interval";
  return "--flush-interval " + Fmt("%.0f", std::max(1.0, std::round(writes / flushes)));
}

// The stack's own flushes below, when it sends at least one per 100,000 guest I/Os more than
// the baseline: on a device whose flush stalls the requests behind it (a virtual disk whose flush
// is the host's fsync), they are often the gap, and the stack's own figures cannot show it.
static std::string OwnFlushesClause(const Attribution& a, const Attribution& base,
                                    const std::string& base_name) {
  constexpr double kShown = 1e-5;
  const double own = OwnFlushesPerIo(a), base_own = OwnFlushesPerIo(base);
  if (own < kShown || own < base_own + kShown) return "";
  // Each layer's wait; stacked, a layer's flush commits the grain layer below it, so their
  // waits overlap: the longest is stated against the time, and each is named.
  std::string waited, each;
  uint64_t longest_us = 0;
  int layers = 0;
  for (const LayerCost& l : a.layers) {
    for (const CounterRate& c : l.counters) {
      if (c.name != kDurableWaitCounter || c.total == 0) continue;
      longest_us = std::max(longest_us, c.total);
      each += std::string(layers++ ? ", " : "") + l.kind + " " + Fmt("%.0f ms", c.total / 1e3);
    }
  }
  if (longest_us > 0 && a.seconds > 0) {
    waited = ", and their commits waited " + Fmt("%.0f ms", longest_us / 1e3) +
             " for flushes and FUA writes below (" +
             Fmt("%.1f%%", 100 * longest_us / (a.seconds * 1e6)) + " of the measured time" +
             (layers > 1 ? "; " + each + ", overlapping where one's flush commits the other" : "") +
             ")";
  }
  return " The layers flush the device below by themselves, " + OneIn(own) + " (" + base_name +
         ": " + OneIn(base_own) + ")" + waited + "; each flush is a wait for everything written "
         "before it: "
         "where a flush stalls the device, as a virtual disk's whose flush is the host's fsync, "
         "that is a cost of the layers' durability that their own time does not show; run " +
         base_name + " with as many flushes (" + MatchingFlushInterval(a) +
         ") to price it (docs/bench.md).";
}

std::string DeviceSentence(const Attribution& a, const Attribution& base,
                           const std::string& base_name) {
  if (a.layers.empty() || base.layers.empty()) return "";
  const LayerCost& dev = a.layers.back();
  const LayerCost& bdev = base.layers.back();
  std::string g = " The device below gets " + Fmt("%.2f", dev.in_total) +
                  " requests per guest I/O (" + base_name + ": " + Fmt("%.2f", bdev.in_total) +
                  ") and spends " + Fmt("%.1f us", dev.self_us_per_io) + " per guest I/O (" +
                  base_name + ": " + Fmt("%.1f us", bdev.self_us_per_io) + ").";
  constexpr double kWorkersShown = 0.05;  // us of CPU per guest I/O
  if (a.cpu_sampled && base.cpu_sampled &&
      std::max(a.outside_uring_us_per_io, base.outside_uring_us_per_io) >= kWorkersShown) {
    g += " io_uring's kernel workers ran " + Fmt("%.2f us", a.outside_uring_us_per_io) +
         " of CPU per guest I/O (" + base_name + ": " +
         Fmt("%.2f us", base.outside_uring_us_per_io) +
         "): the kernel hands them the requests it cannot serve without blocking (a write that "
         "allocates file space, as into a hole a discard punched; a flush).";
  }
  g += OwnFlushesClause(a, base, base_name);
  return g;
}

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

bool PrecisionReached(const MatrixSummary& s, double precision) {
  return s.precision_reached <= precision;
}

std::string NoiseWarning(const MatrixSummary& s, double precision) {
  if (PrecisionReached(s, precision)) return "";
  double others = 0, steal = 0;
  for (const RoundNoise& n : s.noise) {
    others = std::max(others, n.others_cpu_pct);
    steal = std::max(steal, n.steal_pct);
  }
  if (others < 10 && steal < 10) return "";
  return "the machine was busy (other processes up to " + Fmt("%.0f%%", others) +
         " of its CPU, steal up to " + Fmt("%.0f%%", steal) + ") and the intervals are wider than " +
         Fmt("%.1f%%", precision * 100) + " (reached " +
         (std::isfinite(s.precision_reached) ? Fmt("%.1f%%", s.precision_reached * 100)
                                             : std::string("no interval")) +
         "): run again on a quieter machine, or with more rounds (docs/bench.md, Statistics)";
}

// Per round, the medians over the stacks that ran in it.
static std::vector<RoundNoise> NoisePerRound(const MatrixResult& m) {
  std::map<int, std::vector<RunMetrics>> by_round;
  for (const StackOutcome& o : m.stacks) {
    for (const RunResult& r : o.rounds) by_round[r.round].push_back(Metrics(r));
  }
  std::vector<RoundNoise> out;
  for (const auto& [round, ms] : by_round) {
    RoundNoise n;
    n.round = round;
    n.others_cpu_pct = MedianOf(ms, [](const RunMetrics& x) { return x.others_cpu_pct; });
    n.steal_pct = MedianOf(ms, [](const RunMetrics& x) { return x.steal_pct; });
    n.host_ready_pct = MedianOfKnown(ms, [](const RunMetrics& x) { return x.host_ready_pct; });
    n.load_average = -1;
    for (const RunMetrics& x : ms) n.load_average = std::max(n.load_average, x.load_average);
    out.push_back(n);
  }
  return out;
}

MatrixSummary Summarize(const MatrixResult& m) {
  MatrixSummary out;
  out.noise = NoisePerRound(m);
  std::map<int, RunMetrics> base_rounds;  // round -> the baseline's metrics
  for (const StackOutcome& o : m.stacks) {
    StackSummary s;
    s.name = o.plan.name;
    s.spec = o.spec;
    s.chain = o.chain;
    s.note = o.plan.note;
    s.skipped = o.skipped;
    s.error = o.error;
    s.interrupted = o.interrupted;
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
    if (s.runs == 0 && !o.rounds.empty() && s.error.empty() && !s.interrupted) {
      // Its rounds ran, but not one request completed inside a measured window.
      s.error = "no request completed within a round's measured window (one I/O of " +
                std::to_string(o.rounds.front().knobs.block_size) +
                " bytes took longer than it): give a longer --duration, or --ios";
    }
    if (s.runs > 0) {
      std::vector<double> iops, mib_s;
      for (const RunMetrics& x : ms) {
        iops.push_back(x.iops);
        mib_s.push_back(x.mib_s);
      }
      s.iops = SpreadOf(iops);
      s.mib_s = SpreadOf(mib_s);
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
      s.ready_max_stall_ms = MedianOf(ms, [](const RunMetrics& x) { return x.ready_max_stall_ms; });
      s.signal_wait_ms = MedianOf(ms, [](const RunMetrics& x) { return x.signal_wait_ms; });
      s.ready_stalled_pct = MedianOf(ms, [](const RunMetrics& x) { return x.ready_stalled_pct; });
      s.cpu_ready_pct = measured.front()->knobs.cpu_ready_pct;
      s.host_ready_pct = MedianOfKnown(ms, [](const RunMetrics& x) { return x.host_ready_pct; });
      s.p99_us = MedianOf(ms, [](const RunMetrics& x) { return x.p99_us; });
      s.p999_us = MedianOf(ms, [](const RunMetrics& x) { return x.p999_us; });
      s.cpu_us_per_io = MedianOf(ms, [](const RunMetrics& x) { return x.cpu_us_per_io; });
      s.process_cpu_pct = MedianOf(ms, [](const RunMetrics& x) { return x.process_cpu_pct; });
      s.machine_cpu_pct = MedianOf(ms, [](const RunMetrics& x) { return x.machine_cpu_pct; });
      s.others_cpu_pct = MedianOf(ms, [](const RunMetrics& x) { return x.others_cpu_pct; });
      s.iops_per_cpu_s = MedianOf(ms, [](const RunMetrics& x) { return x.iops_per_cpu_s; });
      s.iops_per_cpu_pct = MedianOf(ms, [](const RunMetrics& x) { return x.iops_per_cpu_pct; });
      const CpuUsage cpu = MergeCpu(measured);
      s.attribution = Attribute(MergeLayerDeltas(measured), MeasuredMeanUs(measured), &cpu);
      for (const RunResult* r : measured) s.attribution.seconds += r->seconds;
    }
    s.anchors = SummarizeAnchors(o);
    if (out.baseline.empty() && s.runs > 0) {
      s.baseline = true;
      out.baseline = s.name;
      for (const RunResult* r : measured) base_rounds[r->round] = Metrics(*r);
    }
    if (!out.baseline.empty() && s.runs > 0) {
      std::vector<double> iops, cpu, eff, p99;
      for (const RunResult* r : measured) {
        auto it = base_rounds.find(r->round);
        if (it == base_rounds.end()) continue;
        const RunMetrics x = Metrics(*r), b = it->second;
        iops.push_back(Ratio(x.iops, b.iops));
        cpu.push_back(Ratio(x.cpu_us_per_io, b.cpu_us_per_io));
        eff.push_back(Ratio(x.iops_per_cpu_s, b.iops_per_cpu_s));
        p99.push_back(Ratio(x.p99_us, b.p99_us));
      }
      s.iops_vs_base = SpreadOf(iops);
      s.iops_ratio = PairedRatio(iops);
      s.cpu_ratio = PairedRatio(cpu);
      s.efficiency_ratio = PairedRatio(eff);
      s.p99_ratio = PairedRatio(p99);
    }
    out.stacks.push_back(std::move(s));
  }
  auto base = std::find_if(out.stacks.begin(), out.stacks.end(), [](auto& x) { return x.baseline; });
  if (base == out.stacks.end()) return out;
  const StackSummary b = *base;
  bool compared = false;
  for (StackSummary& s : out.stacks) {
    s.overhead_vs_base = s.efficiency_ratio.n ? 1 - s.efficiency_ratio.estimate : 0;
    s.gap = Gap(s, b);
    if (s.runs == 0 || s.baseline) continue;
    compared = true;
    out.precision_reached = std::max(out.precision_reached, s.iops_ratio.relative_half_width());
  }
  if (!compared) {
    // The baseline alone: the precision of its own IOPS (its rounds over its first round, whose
    // interval is that of the geometric mean IOPS).
    std::vector<double> own;
    for (const auto& [round, m] : base_rounds)
      own.push_back(m.iops / base_rounds.begin()->second.iops);
    out.precision_reached = PairedRatio(own).relative_half_width();
  }
  return out;
}

}  // namespace vstack::bench
