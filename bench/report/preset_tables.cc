// The preset tables of `vstack bench` (see report.h): the published numbers next to vstack's.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench/report/report.h"
#include "bench/workload/cpu_ready_sweep.h"
#include "bench/workload/presets.h"
#include "lib/text_table.h"

namespace vstack::bench {
namespace {

using nlohmann::json;

const StackSummary* Find(const BenchReport& r, const std::string& name) {
  for (const StackSummary& s : r.summary.stacks) {
    if (s.name == name && s.runs > 0) return &s;
  }
  return nullptr;
}

double Relative(double a, double b) { return b > 0 ? a / b : 0; }
std::string RatioAsPct(double ratio) {
  return ratio > 0 ? fmt::format("{:.2f}%", ratio * 100) : "-";
}

// One column of the source's table, from a summary: IOPS, MB/s, response times in ms.
PublishedColumn Column(const StackSummary& s) {
  return {s.iops.median,   s.read_iops,           s.write_iops,
          s.mib_s.median * 1.048576, s.read_mean_us / 1000, s.write_mean_us / 1000,
          s.mean_us / 1000};
}

struct Row {
  const char* label;
  const char* key;
  double PublishedColumn::*field;
  int decimals;
};
constexpr Row kRows[] = {
    {"IOPS total", "iops", &PublishedColumn::iops, 2},
    {"IOPS read", "read_iops", &PublishedColumn::read_iops, 2},
    {"IOPS write", "write_iops", &PublishedColumn::write_iops, 2},
    {"MB/s (10^6 B/s)", "mbps", &PublishedColumn::mbps, 4},
    {"avg read response (ms)", "read_ms", &PublishedColumn::read_ms, 4},
    {"avg write response (ms)", "write_ms", &PublishedColumn::write_ms, 4},
    {"avg response, all I/O (ms)", "all_ms", &PublishedColumn::all_ms, 4},
};

std::string PresetText(const BenchReport& r, const bench::Preset& p) {
  std::string out = fmt::format("\nPreset '{}': {}\n\n", p.name, p.source);
  const bench::PresetPair& first = p.pairs.front();
  const StackSummary* host = Find(r, first.host);
  const StackSummary* guest = Find(r, first.guest);
  TextTable t({"", "published physical", "passthrough", "relative", "vstack " + first.host,
               first.guest, "relative", "difference"},
              {false, true, true, true, true, true, true, true});
  for (const Row& row : kRows) {
    const double ph = p.published_host.*row.field, pg = p.published_guest.*row.field;
    std::vector<std::string> cells = {row.label, Num(ph, row.decimals), Num(pg, row.decimals),
                                      RatioAsPct(Relative(pg, ph))};
    if (host && guest) {
      const double vh = Column(*host).*row.field, vg = Column(*guest).*row.field;
      cells.push_back(Num(vh, row.decimals));
      cells.push_back(Num(vg, row.decimals));
      cells.push_back(RatioAsPct(Relative(vg, vh)));
      cells.push_back(fmt::format("{:+.2f} pts", (Relative(vg, vh) - Relative(pg, ph)) * 100));
    }
    t.AddRow(cells);
  }
  out += t.Render("  ");
  out +=
      "\n  Prediction: the same hv: cost on faster devices (relative = guest / host, median of "
      "rounds)\n\n";
  TextTable q({"device", "host IOPS", "guest IOPS", "relative IOPS", "host avg ms", "guest avg ms",
               "host CPU us/IO", "guest CPU us/IO", "efficiency overhead"},
              {false, true, true, true, true, true, true, true, true});
  for (const bench::PresetPair& pair : p.pairs) {
    const StackSummary* h = Find(r, pair.host);
    const StackSummary* g = Find(r, pair.guest);
    if (!h || !g) {
      q.AddRow({pair.label, "-", "(not run)"});
      continue;
    }
    q.AddRow({pair.label, Num(h->iops.median), Num(g->iops.median),
              RatioAsPct(Relative(g->iops.median, h->iops.median)), Num(h->mean_us / 1000, 4),
              Num(g->mean_us / 1000, 4), Num(h->cpu_us_per_io, 1), Num(g->cpu_us_per_io, 1),
              fmt::format("{:.1f}%", h->iops_per_cpu_s > 0
                                         ? (1 - g->iops_per_cpu_s / h->iops_per_cpu_s) * 100
                                         : 0)});
  }
  out += q.Render("  ");
  out += "\n  Calibration (parameter <- published number):\n";
  for (const std::string& c : p.calibration) out += "    " + c + "\n";
  return out;
}

json PresetJson(const BenchReport& r, const bench::Preset& p) {
  json rows = json::array();
  const StackSummary* host = Find(r, p.pairs.front().host);
  const StackSummary* guest = Find(r, p.pairs.front().guest);
  for (const Row& row : kRows) {
    const double ph = p.published_host.*row.field, pg = p.published_guest.*row.field;
    json j = {{"metric", row.key},
              {"published", {{"host", ph}, {"guest", pg}, {"relative", Relative(pg, ph)}}}};
    if (host && guest) {
      const double vh = Column(*host).*row.field, vg = Column(*guest).*row.field;
      j["vstack"] = {{"host", vh}, {"guest", vg}, {"relative", Relative(vg, vh)}};
    }
    rows.push_back(j);
  }
  json pairs = json::array();
  for (const bench::PresetPair& pair : p.pairs) {
    const StackSummary* h = Find(r, pair.host);
    const StackSummary* g = Find(r, pair.guest);
    if (!h || !g) continue;
    pairs.push_back({{"device", pair.label},
                     {"host", pair.host},
                     {"guest", pair.guest},
                     {"relative_iops", Relative(g->iops.median, h->iops.median)},
                     {"host_mean_ms", h->mean_us / 1000},
                     {"guest_mean_ms", g->mean_us / 1000},
                     {"host_cpu_us_per_io", h->cpu_us_per_io},
                     {"guest_cpu_us_per_io", g->cpu_us_per_io}});
  }
  return {{"preset", p.name},
          {"source", p.source},
          {"table", rows},
          {"predictions", pairs},
          {"calibration", p.calibration}};
}

std::string CpuReadyText(const BenchReport& r) {
  std::string out;
  for (const ReportTable& t : CpuReadyTables(r)) out += RenderTableText(t);
  return out;
}

json CpuReadyJson(const BenchReport& r) {
  const auto rows = SchedulerRows(r.result, r.summary);
  if (rows.empty()) return nullptr;
  json out = json::array();
  for (const StackSummary* s : rows) {
    out.push_back(
        {{"stack", s->name},
         {"cpu_ready_pct", s->cpu_ready_pct},
         {"ready_injected_pct", s->ready_stalled_pct},
         {"host_ready_pct", s->host_ready_pct < 0 ? json(nullptr) : json(s->host_ready_pct)},
         {"max_stall_ms", s->ready_max_stall_ms},
         {"yields", s->yields},
         {"wait_ms", s->yield_wait_ms},
         {"max_wait_ms", s->yield_max_wait_ms},
         {"signal_wait_ms", s->signal_wait_ms},
         {"duration_s", MedianWindowSeconds(r.result, s->name)},
         {"latency_us", {{"p50", s->p50_us}, {"p99", s->p99_us}, {"p99.9", s->p999_us}}}});
  }
  json pub = json::array();
  for (const auto& p : bench::PublishedCpuReadyTable()) {
    pub.push_back({{"cpu_ready_pct", p.ready_pct},
                   {"yields", p.yields},
                   {"wait_ms", p.wait_ms},
                   {"max_wait_ms", p.max_wait_ms},
                   {"signal_wait_ms", p.signal_wait_ms},
                   {"duration_s", p.duration_s}});
  }
  const std::string warning = CpuReadyWarning(r.result, r.summary);
  return {{"vstack", out},
          {"published", pub},
          {"warning", warning.empty() ? json(nullptr) : json(warning)}};
}

}  // namespace

std::vector<ReportTable> CpuReadyTables(const BenchReport& r) {
  const auto rows = SchedulerRows(r.result, r.summary);
  if (rows.empty()) return {};
  ReportTable t;
  t.title = "CPU Ready and the quantum scheduler (SOS_SCHEDULER_YIELD, as sys.dm_os_wait_stats; "
            "medians of rounds)";
  t.header = {"stack", "RDY% set", "RDY% injected", "host RDY%", "max stall ms", "yields",
              "wait ms", "max wait ms", "signal wait ms", "signal %", "duration s", "p50 us",
              "p99 us", "p99.9 us"};
  t.numeric = std::vector<bool>(t.header.size(), true);
  t.numeric[0] = false;
  for (const StackSummary* s : rows) {
    t.rows.push_back({s->name, Num(s->cpu_ready_pct, 1), Num(s->ready_stalled_pct, 1),
                      KnownPct(s->host_ready_pct, 2), Num(s->ready_max_stall_ms, 1), Num(s->yields),
                      Num(s->yield_wait_ms, 1), Num(s->yield_max_wait_ms, 1),
                      Num(s->signal_wait_ms, 1),
                      RatioAsPct(Relative(s->signal_wait_ms, s->yield_wait_ms)),
                      Num(MedianWindowSeconds(r.result, s->name), 2), Num(s->p50_us, 1),
                      Num(s->p99_us, 1), Num(s->p999_us, 1)});
  }
  t.legend = "RDY% injected = the stalls vstack put on the schedulers; " + HostReadyLegend() +
             " To the workload the two are the same thing.";
  if (const std::string w = CpuReadyWarning(r.result, r.summary); !w.empty()) t.legend += " WARNING: " + w + ".";
  if (rows.size() < 2) return {t};
  const auto& pub = bench::PublishedCpuReadyTable();
  const std::vector<CpuReadyGrowth> growth = CpuReadyGrowthRows(r.result, r.summary);
  ReportTable g;
  g.title = "Growth against the first row, next to the published table's (vSphere, SQL Server: "
            "RDY% 1.2 / 5.1 / 28.4)";
  g.header = {"stack", "yields x", "wait x", "max wait ms", "wait per yield ms", "published RDY%",
              "yields x", "wait x", "max wait ms", "wait per yield ms"};
  g.numeric = std::vector<bool>(g.header.size(), true);
  g.numeric[0] = false;
  // A ratio to nothing (a control without yields) is undefined: "-", not 0.
  auto times = [](double x) { return std::isfinite(x) ? fmt::format("{:.2f}", x) : std::string("-"); };
  for (size_t i = 0; i < rows.size(); ++i) {
    const StackSummary* s = rows[i];
    const CpuReadyGrowth& x = growth[i];
    std::vector<std::string> cells = {
        s->name, times(x.yields_x), times(x.wait_x), Num(s->yield_max_wait_ms, 1),
        s->yields > 0 ? Num(s->yield_wait_ms / s->yields, 2) : std::string("-")};
    if (x.has_published) {
      cells.push_back(Num(x.published_ready_pct, 1));
      cells.push_back(times(x.published_yields_x));
      cells.push_back(times(x.published_wait_x));
      cells.push_back(Num(pub[i].max_wait_ms, 0));
      cells.push_back(Num(pub[i].wait_ms / pub[i].yields, 2));
    }
    g.rows.push_back(cells);
  }
  return {t, g};
}

std::string RenderPresetTables(const BenchReport& r) {
  std::string out;
  if (r.preset == "kvm-vs-hyperv") {
    out += KvmHypervText(r);
  } else if (!r.preset.empty()) {
    if (auto p = bench::FindPreset(r.preset)) out += PresetText(r, *p);
  }
  out += CpuReadyText(r);
  return out;
}

json PresetTablesJson(const BenchReport& r) {
  json j = json::object();
  if (r.preset == "kvm-vs-hyperv") {
    j["preset"] = KvmHypervJson(r);
  } else if (!r.preset.empty()) {
    if (auto p = bench::FindPreset(r.preset)) j["preset"] = PresetJson(r, *p);
  }
  if (json c = CpuReadyJson(r); !c.is_null()) j["cpu_ready"] = c;
  return j.empty() ? json(nullptr) : j;
}

}  // namespace vstack::bench
