// The reports of `vstack bench`, all made from one BenchReport (the matrix results and their
// summary), so the text, the JSON, the charts and index.html always say the same numbers.
#ifndef VSTACK_BENCH_REPORT_REPORT_H_
#define VSTACK_BENCH_REPORT_REPORT_H_

#include <nlohmann/json.hpp>

#include <string>

#include "bench/report/bench.h"
#include "bench/workload/cpu_ready_sweep.h"
#include "bench/workload/matrix.h"
#include "bench/workload/summary.h"

namespace vstack::bench {

// The percentile rows of the latency tables, diskspd's: 25th ... 6-nines.
struct PercentileRow {
  double pct;
  const char* label;  // text label ("99th", "3-nines")
  const char* key;    // JSON key ("p99", "p99.9")
};
const std::vector<PercentileRow>& PercentileRows();

// One table of the comparison, as cells, so the text and index.html show the same columns.
struct ReportTable {
  std::string title;
  std::vector<std::string> header;
  std::vector<bool> numeric;                   // right-aligned columns
  std::vector<std::vector<std::string>> rows;  // a row may be shorter (a note in its 3rd cell)
  std::string legend;                          // printed under the table
};
// The comparison (absolute figures, medians of rounds), the ratios against the baseline with
// their 95% intervals, and the machine's noise per round.
std::vector<ReportTable> ComparisonTables(const BenchReport& r);

// How the numbers were combined over rounds, in one sentence (the rule the reports apply).
std::string RoundRule(const BenchReport& r);

// The whole text report: parameters, each stack's median round in diskspd's layout (CPU table,
// per-thread Total/Read/Write tables, percentile table, layers), then the comparison table,
// the gaps in words, the anchors, skipped stacks and errors.
std::string RenderText(const BenchReport& r);
// Only the comparison table and what follows it (for --quiet runs and the HTML page).
std::string RenderComparisonText(const BenchReport& r);

// The same numbers as JSON, with every round's full results.
nlohmann::json RenderJson(const BenchReport& r);

// The preset tables (docs/presets.md), when the run reproduces a published finding: with a seed
// preset, the source's table side by side with vstack's and the predictions; with the quantum
// scheduler, the SOS_SCHEDULER_YIELD table and its ratios against the published CPU Ready
// table. "" / null when neither applies.
std::string RenderPresetTables(const BenchReport& r);
// The CPU Ready tables of a --cpu-ready run (the quantum scheduler's yields with the injected
// and the host's CPU Ready, then the growth against the first row next to the published one);
// none without the quantum scheduler. Shown in the text and in index.html.
std::vector<ReportTable> CpuReadyTables(const BenchReport& r);
// One table as text: its title, the table, the legend wrapped.
std::string RenderTableText(const ReportTable& t);
nlohmann::json PresetTablesJson(const BenchReport& r);
// The kvm-vs-hyperv preset's tables (bench/workload/kvm_hyperv_report.h): each guest in diskspd's
// layout beside the published output, the KVM / Hyper-V ratios with intervals, the attribution,
// the prediction and the calibration; and the same numbers as JSON.
std::string KvmHypervText(const BenchReport& r);
nlohmann::json KvmHypervJson(const BenchReport& r);

// "12,345" / "1,234.5": thousands grouped, `decimals` after the point.
std::string Num(double v, int decimals = 0);
// A percentage that may be unknown: "n/a" when < 0 (never "0"), else Num(pct, decimals).
std::string KnownPct(double pct, int decimals = 1);
// What "host RDY %" means, in one sentence (the legends of the tables that show it).
std::string HostReadyLegend();

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_REPORT_REPORT_H_
