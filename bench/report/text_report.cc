// The text report, in the layout of diskspd's: parameters first, then per stack the CPU table,
// the per-thread Total/Read/Write tables and the percentile table, then the comparison.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "bench/report/report.h"
#include "lib/size.h"
#include "lib/text_table.h"

namespace vstack::bench {

const std::vector<PercentileRow>& PercentileRows() {
  static const std::vector<PercentileRow> rows = {
      {25, "25th", "p25"},           {50, "50th", "p50"},         {75, "75th", "p75"},
      {90, "90th", "p90"},           {95, "95th", "p95"},         {99, "99th", "p99"},
      {99.9, "3-nines", "p99.9"},    {99.99, "4-nines", "p99.99"}, {99.999, "5-nines", "p99.999"},
      {99.9999, "6-nines", "p99.9999"}};
  return rows;
}

std::string Num(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  std::string s = fmt::format("{:.{}f}", std::fabs(v), decimals);
  const size_t point = s.find('.');
  const size_t int_end = point == std::string::npos ? s.size() : point;
  std::string grouped;
  for (size_t i = 0; i < int_end; ++i) {
    if (i != 0 && (int_end - i) % 3 == 0) grouped += ',';
    grouped += s[i];
  }
  grouped += s.substr(int_end);
  const bool negative = v < 0 && std::stod(s) != 0;
  return (negative ? "-" : "") + grouped;
}

std::string KnownPct(double pct, int decimals) { return pct < 0 ? "n/a" : Num(pct, decimals); }

std::string HostReadyLegend() {
  return "host RDY% = the host's own CPU Ready: the run-queue wait of the benchmark's threads "
         "(workload threads and io_uring workers, /proc/self/task/*/schedstat) as a share of "
         "their wall time; n/a where the kernel keeps no schedule statistics.";
}

namespace {

std::string OneDecimalPct(double pct) { return fmt::format("{:.1f}%", pct); }

std::string Us(uint64_t ns) { return Num(double(ns) / 1000.0, 1); }

// "fill", or "fill (auto: the device starts empty on every open)".
std::string PrepareText(const bench::StackOutcome& s) {
  if (s.plan.prepare != bench::Prepare::kAuto) return bench::PrepareName(s.plan.prepare);
  if (s.prepared == bench::Prepare::kAuto) return "auto (not resolved: the stack never opened)";
  return std::string(bench::PrepareName(s.prepared)) +
         (s.prepared == bench::Prepare::kFill ? " (auto: the device starts empty on every open)"
                                              : " (auto: the device keeps its data)") +
         (s.plan.read_only ? ", opened read-only" : "");
}

void Parameters(const BenchReport& r, std::string& out) {
  const bench::WorkloadKnobs& k = r.result.knobs;
  out += "Command Line: " + r.command + "\n\nInput parameters:\n\n";
  out += fmt::format("  workload:  {}\n", bench::DescribeWorkload(k));
  out += fmt::format("  target:    {} from offset 0 of each stack (the same region in every stack)\n",
                     k.target_size ? FormatSize(k.target_size) : std::string("the whole device"));
  out += fmt::format("  content:   {}\n", bench::DescribeContent(k));
  out += fmt::format("  flush:     {}\n", k.flush_interval ? fmt::format("after every {} writes "
                                                                         "per thread",
                                                                         k.flush_interval)
                                                           : std::string("never"));
  out += fmt::format("  seed:      {} (round r uses seed + r; every stack of a round the same)\n",
                     k.seed);
  if (r.result.auto_rounds) {
    out += fmt::format("  rounds:    auto (until every IOPS interval is within {:.1f}%, at most {} s), "
                       "{} done{}, interleaved (A B C ... A B C ...)\n",
                       r.result.precision_asked * 100, r.result.max_time_s, r.result.rounds_done,
                       r.result.rounds_stopped.empty() ? "" : ": " + r.result.rounds_stopped);
  } else {
    out += fmt::format("  rounds:    {} planned, {} done, interleaved (A B C ... A B C ...)\n",
                       r.result.rounds_planned, r.result.rounds_done);
  }
  if (!r.result.scratch_dir.empty()) {
    out += fmt::format("  scratch:   {} (removed at exit)\n", r.result.scratch_dir);
  }
  out += "  stacks:\n";
  for (const bench::StackOutcome& s : r.result.stacks) {
    out += fmt::format("    {:<18} {}\n", s.plan.name, s.spec);
    if (!s.skipped.empty()) {
      out += fmt::format("      skipped: {}\n", s.skipped);
      continue;
    }
    out += fmt::format("      prepare: {}{}\n", PrepareText(s),
                       s.plan.note.empty() ? "" : " - " + s.plan.note);
    for (size_t i = 0; i < s.chain.size(); ++i) out += fmt::format("      [{}] {}\n", i, s.chain[i]);
  }
}

void CpuTable(const RunResult& run, std::string& out) {
  const bench::CpuUsage& c = run.cpu;
  TextTable t({"CPU", "Usage", "User", "Kernel", "Idle", "Steal"},
              {true, true, true, true, true, true});
  double su = 0, sk = 0, si = 0, ss = 0;
  for (size_t i = 0; i < c.cpus.size(); ++i) {
    const bench::CpuTimes& x = c.cpus[i];
    const double total = x.user + x.kernel + x.idle + x.steal;
    auto p = [&](double v) { return OneDecimalPct(total > 0 ? 100 * v / total : 0); };
    t.AddRow({std::to_string(i), p(x.user + x.kernel), p(x.user), p(x.kernel), p(x.idle), p(x.steal)});
    su += x.user, sk += x.kernel, si += x.idle, ss += x.steal;
  }
  const double total = su + sk + si + ss;
  auto p = [&](double v) { return OneDecimalPct(total > 0 ? 100 * v / total : 0); };
  t.AddRule();
  t.AddRow({"avg.", p(su + sk), p(su), p(sk), p(si), p(ss)});
  out += t.Render("  ");
  const bench::RunMetrics m = bench::Metrics(run);
  out += fmt::format(
      "  vstack process: user {:.2f} s, kernel {:.2f} s = {} of the machine; others {}\n",
      c.process_user_s, c.process_kernel_s, OneDecimalPct(m.process_cpu_pct),
      OneDecimalPct(m.others_cpu_pct));
  if (c.threads_s >= 0) {
    out += fmt::format("  benchmark threads (every thread but the coordinator's: workload, io_uring "
                       "workers, layers' helpers): {:.3f} s = {:.2f} us per I/O\n",
                       c.threads_s, m.cpu_us_per_io);
  }
  const bench::HostReady& h = run.host_ready;
  if (!h.measured) {
    out += "  host CPU Ready: n/a (the kernel gives no schedstat for the threads)\n";
    return;
  }
  out += fmt::format(
      "  host CPU Ready: {} threads waited {:.3f} s on a run queue = {} of their "
      "wall time (host RDY%)\n",
      h.threads, double(h.run_queue_ns) / 1e9, OneDecimalPct(h.Pct()));
}

// One diskspd-style table: a row per thread, then the total.
void IoTable(const std::string& title, const RunResult& run,
             OpTotals (*pick)(const bench::ThreadResult&), std::string& out) {
  out += "\n" + title + "\n";
  TextTable t({"thread", "bytes", "I/Os", "MiB/s", "I/O per s", "AvgLat (us)", "LatStdDev (us)"},
              {true, true, true, true, true, true, true});
  auto row = [&](const std::string& name, const OpTotals& o) {
    const double secs = run.seconds > 0 ? run.seconds : 1;
    t.AddRow({name, Num(double(o.bytes)), Num(double(o.ios)),
              Num(double(o.bytes) / secs / (1 << 20), 2), Num(double(o.ios) / secs, 2),
              Num(o.latency.mean() / 1000, 1), Num(o.latency.stddev() / 1000, 1)});
  };
  OpTotals total;
  for (const bench::ThreadResult& th : run.threads) {
    const OpTotals o = pick(th);
    row(std::to_string(th.index), o);
    total.Merge(o);
  }
  t.AddRule();
  row("total", total);
  out += t.Render("  ");
}

void PercentileTable(const RunResult& run, std::string& out) {
  const OpTotals rd = run.Read(), wr = run.Write(), all = run.Total();
  TextTable t({"%-ile", "Read (us)", "Write (us)", "Total (us)"}, {true, true, true, true});
  auto cell = [](const OpTotals& o, double p) {
    return o.ios ? Us(p <= 0 ? o.latency.min() : p >= 100 ? o.latency.max() : o.latency.Percentile(p))
                 : std::string("N/A");
  };
  t.AddRow({"min", cell(rd, 0), cell(wr, 0), cell(all, 0)});
  for (const PercentileRow& row : PercentileRows()) {
    t.AddRow({row.label, cell(rd, row.pct), cell(wr, row.pct), cell(all, row.pct)});
  }
  t.AddRow({"max", cell(rd, 100), cell(wr, 100), cell(all, 100)});
  out += "\n" + t.Render("  ");
}

void RunDetails(const StackSummary& s, const RunResult& run, int rounds, std::string& out) {
  out += "\n" + std::string(78, '=') + "\n";
  out += fmt::format("Stack {} - round {} of {}: the round closest to the median IOPS of {} "
                     "round(s)\n", s.name, run.round + 1, rounds, s.runs);
  out += std::string(78, '=') + "\n";
  out += fmt::format("  actual test time: {:.2f} s    thread count: {}    cpu count: {}\n\n",
                     run.seconds, run.threads.size(), run.cpu.cpus.size());
  if (run.interrupted) out += "  INTERRUPTED: the window ends where Ctrl-C stopped it\n";
  if (!run.error.empty()) out += "  ERROR: " + run.error + " (the numbers cover up to it)\n";
  CpuTable(run, out);
  IoTable("Total IO", run, [](const bench::ThreadResult& t) { return t.Total(); }, out);
  IoTable("Read IO", run, [](const bench::ThreadResult& t) { return t.read; }, out);
  IoTable("Write IO", run, [](const bench::ThreadResult& t) { return t.write; }, out);
  if (run.Flush().ios || run.Flush().errors) {
    IoTable("Flush", run, [](const bench::ThreadResult& t) { return t.flush; }, out);
  }
  PercentileTable(run, out);
  out += "\n  Layers, per guest I/O (all rounds):\n";
  for (const bench::LayerCost& c : s.attribution.layers) out += "    " + c.words + "\n";
  if (!s.attribution.cpu_words.empty()) out += "    " + s.attribution.cpu_words + "\n";
}

}  // namespace

// True when only one stack measured anything: there is no ratio, and --rounds auto waits for
// that stack's own IOPS interval (summary.h, precision_reached).
bool OneStackMeasured(const bench::MatrixSummary& sum) {
  return std::count_if(sum.stacks.begin(), sum.stacks.end(),
                       [](const bench::StackSummary& s) { return s.runs > 0; }) == 1;
}

std::string RoundRule(const BenchReport& r) {
  const std::string base = r.summary.baseline.empty() ? "the baseline" : r.summary.baseline;
  return "Each stack's figures are the median over its rounds (an even count: the mean of the two "
         "middle ones); ratios to " + base + " are the geometric mean of the paired per-round "
         "ratios (round r of a stack with round r of " + base + ") with a 95% Student t-interval; "
         "the per-stack tables above show the round closest to the median IOPS.";
}

std::vector<ReportTable> ComparisonTables(const BenchReport& r) {
  const bench::MatrixSummary& sum = r.summary;
  const std::string base = sum.baseline.empty() ? "base" : sum.baseline;
  auto not_measured = [&](const StackSummary& s) {
    if (!s.skipped.empty()) return std::string("(skipped)");
    if (!s.error.empty()) return std::string("(failed)");
    return std::string(r.result.interrupted ? "not run (interrupted)" : "not run");
  };
  ReportTable abs;
  abs.title = fmt::format("Comparison: {} round(s){}", r.result.rounds_done,
                          sum.baseline.empty() ? "" : "; baseline " + sum.baseline);
  abs.header = {"stack", "IOPS", "(min-max)", "MiB/s", "p50 us", "p99 us", "p99.9 us",
                "CPU us/IO", "CPU %", "IOPS/CPU-s", "IOPS/%CPU"};
  abs.numeric = {false, true, false, true, true, true, true, true, true, true, true};
  ReportTable rel;
  rel.title = "Against " + base + ": ratio (95% interval), paired per round";
  rel.header = {"stack", "IOPS", "CPU per I/O", "p99", "efficiency overhead"};
  rel.numeric = {false, true, true, true, true};
  auto ratio = [](const bench::RatioInterval& x) {
    if (x.n == 0) return std::string("n/a");
    if (!x.has_interval()) return fmt::format("{:.3f}x (1 round)", x.estimate);
    return fmt::format("{:.3f}x ({:.3f}-{:.3f}){}", x.estimate, x.low, x.high,
                       x.significant ? "" : " n.s.");
  };
  auto overhead = [](const StackSummary& s) {
    const bench::RatioInterval& e = s.efficiency_ratio;
    if (e.n == 0) return std::string("n/a");
    // Never "-0.0%": a value that rounds to zero prints as 0.0.
    const double pct = std::fabs(s.overhead_vs_base) < 0.0005 ? 0.0 : s.overhead_vs_base * 100;
    if (!e.has_interval()) return fmt::format("{:.1f}% (1 round)", pct);
    return fmt::format("{:.1f}% ({:.1f} to {:.1f}%){}", pct, (1 - e.high) * 100,
                       (1 - e.low) * 100, e.significant ? "" : " n.s.");
  };
  for (const StackSummary& s : sum.stacks) {
    if (s.runs == 0) {
      abs.rows.push_back({s.name, "-", not_measured(s)});
      continue;
    }
    abs.rows.push_back({s.name, Num(s.iops.median),
                        "(" + Num(s.iops.min) + "-" + Num(s.iops.max) + ")", Num(s.mib_s.median, 1),
                        Num(s.p50_us, 1), Num(s.p99_us, 1), Num(s.p999_us, 1),
                        Num(s.cpu_us_per_io, 2), Num(s.process_cpu_pct, 1), Num(s.iops_per_cpu_s),
                        Num(s.iops_per_cpu_pct, 1)});
    if (s.baseline) continue;
    rel.rows.push_back({s.name, ratio(s.iops_ratio), ratio(s.cpu_ratio), ratio(s.p99_ratio),
                        overhead(s)});
  }
  std::vector<double> others;
  for (const StackSummary& s : sum.stacks) if (s.runs) others.push_back(s.others_cpu_pct);
  const bench::Spread o = bench::SpreadOf(others);
  abs.legend =
      "CPU % = the vstack process's CPU as a share of the whole machine; CPU us/IO and IOPS/CPU-s "
      "count the benchmark's own threads (workload threads + io_uring workers). " + RoundRule(r) +
      " Other load on the machine: " +
      (o.n ? fmt::format("{:.1f}% median ({:.1f}-{:.1f}%).", o.median, o.min, o.max)
           : std::string("n/a."));
  rel.legend =
      "n.s. = not significant: the 95% interval includes 1 (no change). Efficiency "
      "overhead = (base efficiency - efficiency) / base efficiency, as in the Hyper-V "
      "whitepaper (efficiency = I/Os per CPU-second); its interval is 1 minus the "
      "efficiency ratio's. Precision reached (" +
      std::string(OneStackMeasured(sum) ? "the stack's own IOPS interval over the rounds"
                                        : "widest IOPS interval") +
      ", half-width): " +
      (std::isfinite(sum.precision_reached)
           ? fmt::format("{:.1f}%.", sum.precision_reached * 100)
           : std::string("none (some stack has fewer than 2 paired rounds)."));
  ReportTable noise;
  noise.title = "Noise per round (medians over the stacks of the round)";
  noise.header = {"round", "others' CPU %", "steal %", "load average", "host RDY%"};
  noise.numeric = {true, true, true, true, true};
  for (const bench::RoundNoise& n : sum.noise) {
    noise.rows.push_back({std::to_string(n.round + 1), Num(n.others_cpu_pct, 1), Num(n.steal_pct, 1),
                          n.load_average < 0 ? "n/a" : Num(n.load_average, 2),
                          KnownPct(n.host_ready_pct, 2)});
  }
  noise.legend = "others' CPU % = busy CPU of other processes as a share of the machine's "
                 "capacity. " + HostReadyLegend();
  std::vector<ReportTable> tables = {abs};
  if (!rel.rows.empty()) tables.push_back(rel);
  if (!noise.rows.empty()) tables.push_back(noise);
  return tables;
}

// Breaks `text` into lines of about `width` characters, each starting with `indent`.
std::string Wrap(const std::string& text, const std::string& indent, size_t width = 96) {
  std::string out, line;
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    if (!line.empty() && line.size() + 1 + w.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

std::string RenderTableText(const ReportTable& t) {
  TextTable table(t.header, t.numeric);
  for (const auto& row : t.rows) table.AddRow(row);
  return "\n" + t.title + "\n" + table.Render("  ") + Wrap(t.legend, "  ");
}

std::string RenderComparisonText(const BenchReport& r) {
  const bench::MatrixSummary& sum = r.summary;
  std::string out;
  const std::string base = sum.baseline.empty() ? "base" : sum.baseline;
  for (const ReportTable& t : ComparisonTables(r)) out += RenderTableText(t);
  if (r.result.auto_rounds) {
    const std::string w = bench::NoiseWarning(sum, r.result.precision_asked);
    if (!w.empty()) out += "\n" + Wrap("WARNING: " + w + ".", "  ");
  }

  bool any_gap = false;
  for (const StackSummary& s : sum.stacks) {
    if (s.runs == 0 || s.baseline) continue;
    if (!any_gap) out += "\nGaps to " + base + ", layer by layer:\n";
    any_gap = true;
    out += "  " + s.name + ": " + s.gap + "\n";
    for (const bench::LayerCost& c : s.attribution.layers) out += "    " + c.words + "\n";
    if (!s.attribution.cpu_words.empty()) out += "    " + s.attribution.cpu_words + "\n";
  }
  bool any_anchor = false;
  for (const StackSummary& s : sum.stacks) {
    for (const bench::AnchorSummary& a : s.anchors) {
      if (!any_anchor) out += "\nAnchors (run right after the stack, every round, same files and knobs):\n";
      any_anchor = true;
      if (a.runs == 0) {
        out += fmt::format("  {} on {}: no successful run\n", a.tool, s.name);
      } else {
        out += fmt::format(
            "  {} on {}: {} IOPS ({}-{}), {} MiB/s, p50 {} us, p99 {} us, CPU {} us/IO; "
            "vstack/{} = {}\n",
            a.tool, s.name, Num(a.iops.median), Num(a.iops.min), Num(a.iops.max),
            Num(a.mib_s, 1), a.p50_us < 0 ? "n/a" : Num(a.p50_us, 1),
            a.p99_us < 0 ? "n/a" : Num(a.p99_us, 1),
            a.cpu_us_per_io < 0 ? "n/a" : Num(a.cpu_us_per_io, 2), a.tool,
            bench::DescribeRatio(a.ratio_interval));
        out += fmt::format("    I/Os per round (median): vstack {}, {} {}{}\n", Num(a.vstack_ios),
                           a.tool, Num(a.tool_ios), a.capped ? " (capped by time, see below)" : "");
        out += "    $ " + a.command + "\n";
        if (!a.note.empty()) out += "    " + a.note + "\n";
      }
      for (const std::string& e : a.errors) out += "    error: " + e + "\n";
    }
  }
  bool any_problem = false;
  for (const StackSummary& s : sum.stacks) {
    if (s.skipped.empty() && s.error.empty()) continue;
    if (!any_problem) out += "\nNot measured in full:\n";
    any_problem = true;
    if (!s.skipped.empty()) out += "  " + s.name + ": skipped - " + s.skipped + "\n";
    if (!s.error.empty()) {
      out += "  " + s.name + ": ERROR - " + s.error +
             (s.runs ? " (rounds before and up to the error are included)" : "") + "\n";
    }
  }
  if (r.result.interrupted) {
    out += fmt::format("\nINTERRUPTED after {} complete round(s): the results above are partial.\n",
                       r.result.rounds_done);
  }
  if (!r.result.error.empty()) out += "\nERROR: " + r.result.error + "\n";
  return out;
}

std::string RenderText(const BenchReport& r) {
  std::string out;
  Parameters(r, out);
  for (size_t i = 0; i < r.summary.stacks.size() && i < r.result.stacks.size(); ++i) {
    const StackSummary& s = r.summary.stacks[i];
    for (const RunResult& run : r.result.stacks[i].rounds) {
      // Of the rounds planned, or with --rounds auto of those that ran.
      const int of = r.result.auto_rounds ? std::max(r.result.rounds_done, run.round + 1)
                                          : r.result.rounds_planned;
      if (run.round == s.median_round) RunDetails(s, run, of, out);
    }
  }
  out += RenderComparisonText(r);
  out += RenderPresetTables(r);
  return out;
}

}  // namespace vstack::bench
