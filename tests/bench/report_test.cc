// The reports say the same numbers: the text tables are parsed back and compared with the JSON,
// both rendered from one short matrix run on memory and null stacks. The report folder holds
// every file, and the charts are complete SVG documents.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>

#include "bench/report/charts.h"
#include "bench/report/report.h"
#include "bench/report/report_dir.h"
#include "bench/workload/matrix.h"
#include "bench/workload/summary.h"
#include "lib/xml_escape.h"
#include "tests/testing/test_util.h"

namespace vstack::bench {
namespace {

using nlohmann::json;

std::vector<std::string> Split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

// "12,345.6" / "0.987x" / "3.4%" -> 12345.6 / 0.987 / 3.4
double Number(std::string s) {
  std::string clean;
  for (char c : s) {
    if (c != ',' && c != 'x' && c != '%' && c != '(' && c != ')') clean += c;
  }
  return std::stod(clean);
}

// The lines of `text` from the one starting with `start` up to the next empty line.
std::vector<std::string> Section(const std::string& text, const std::string& start) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (!inside && line.rfind(start, 0) == 0) inside = true;
    if (inside) {
      if (line.empty()) break;
      lines.push_back(line);
    }
  }
  return lines;
}

// Expects the text to show `v` rounded to `decimals`.
void ExpectShows(const std::string& cell, double v, int decimals, const std::string& what) {
  const double unit = std::pow(10.0, -decimals);
  EXPECT_NEAR(Number(cell), v, unit * 0.51 + std::fabs(v) * 1e-12) << what << ": text '" << cell << "'";
}

class ReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bench::MatrixOptions o;
    o.knobs.block_size = 4096;
    o.knobs.threads = 2;
    o.knobs.queue_depth = 4;
    o.knobs.duration_s = 0.15;
    o.knobs.warmup_s = 0.05;
    o.knobs.target_size = 8 << 20;
    o.knobs.flush_interval = 16;
    o.rounds = 3;
    // dedup: a layer that splits its CPU by phase (the per-layer words list them); 64M below
    // the 8M it maps, so that copy-on-write never runs out of free units.
    for (const char* s :
         {"memory:16M", "passthrough+memory:16M", "null:16M", "dedup+memory:64M"}) {
      o.stacks.push_back(*bench::ResolveStack(s, bench::BackendChoice{}));
    }
    report_ = new BenchReport;
    report_->command = "vstack bench (test)";
    report_->result = bench::RunMatrix(o);
    report_->summary = bench::Summarize(report_->result);
  }
  static void TearDownTestSuite() { delete report_; }

  static BenchReport* report_;
};
BenchReport* ReportTest::report_ = nullptr;

TEST_F(ReportTest, ComparisonTableAndJsonAgree) {
  const std::string text = RenderText(*report_);
  const json j = RenderJson(*report_);
  ASSERT_EQ(j["stacks"].size(), 4u);
  EXPECT_EQ(j["baseline"], "memory:16M");
  const auto table = Section(text, "Comparison");
  ASSERT_GE(table.size(), 6u) << text;
  for (const json& s : j["stacks"]) {
    const std::string name = s["name"];
    const json& sum = s["summary"];
    ASSERT_FALSE(sum.is_null()) << name;
    std::vector<std::string> cells;
    for (const std::string& line : table) {
      auto t = Split(line);
      if (!t.empty() && t[0] == name) cells = t;
    }
    ASSERT_EQ(cells.size(), 11u) << "no comparison row for " << name;
    ExpectShows(cells[1], sum["iops"]["median"], 0, name + " IOPS");
    const auto range = cells[2].substr(1, cells[2].size() - 2);
    ExpectShows(range.substr(0, range.find('-')), sum["iops"]["min"], 0, name + " IOPS min");
    ExpectShows(range.substr(range.find('-') + 1), sum["iops"]["max"], 0, name + " IOPS max");
    ExpectShows(cells[3], sum["mib_s"]["median"], 1, name + " MiB/s");
    ExpectShows(cells[4], sum["latency_us"]["p50"], 1, name + " p50");
    ExpectShows(cells[5], sum["latency_us"]["p99"], 1, name + " p99");
    ExpectShows(cells[6], sum["latency_us"]["p99.9"], 1, name + " p99.9");
    ExpectShows(cells[7], sum["cpu_us_per_io"], 2, name + " CPU/IO");
    ExpectShows(cells[8], sum["process_cpu_pct"], 1, name + " CPU %");
    ExpectShows(cells[9], sum["iops_per_cpu_s"], 0, name + " IOPS/CPU-s");
    ExpectShows(cells[10], sum["iops_per_cpu_pct"], 1, name + " IOPS/%CPU");
    if (!s["baseline"]) {
      // The ratios to the baseline, each with its interval and "n.s." when not significant.
      std::string row;
      for (const std::string& line : Section(text, "Against")) {
        if (!Split(line).empty() && Split(line)[0] == name) row = line;
      }
      ASSERT_FALSE(row.empty()) << "no ratio row for " << name << "\n" << text;
      for (const char* key : {"iops", "cpu_per_io", "p99"}) {
        const json& v = sum["vs_base"][key];
        const std::string cell =
            fmt::format("{:.3f}x ({:.3f}-{:.3f}){}", double(v["estimate"]), double(v["ci_low"]),
                        double(v["ci_high"]), v["significant"] ? "" : " n.s.");
        EXPECT_NE(row.find(cell), std::string::npos) << key << ": " << cell << " in " << row;
        EXPECT_EQ(bool(v["significant"]), double(v["ci_low"]) > 1 || double(v["ci_high"]) < 1);
      }
      const json& o = sum["vs_base"]["efficiency_overhead"];
      const double pct = std::fabs(double(o["estimate"])) < 0.0005 ? 0.0 : double(o["estimate"]) * 100;
      EXPECT_NE(row.find(fmt::format("{:.1f}% ({:.1f} to {:.1f}%)", pct,
                                     double(o["ci_low"]) * 100, double(o["ci_high"]) * 100)),
                std::string::npos)
          << row;
      EXPECT_NE(text.find(std::string(sum["gap"])), std::string::npos) << name;
    }
    for (const json& l : s["attribution"]["layers"]) {
      const std::string words = l["words"];
      EXPECT_NE(text.find(words), std::string::npos) << words;
      // CPU by phase: each phase's figure in the JSON is the one the words show, and the
      // phases add up to the layer's CPU (to the rounding of each).
      if (l["cpu_phases"].is_null()) continue;
      double sum = 0;
      for (const auto& [phase, us] : l["cpu_phases"].items()) {
        EXPECT_NE(words.find(fmt::format("{} {:.2f}", phase, double(us))), std::string::npos)
            << phase << " in " << words;
        sum += double(us);
      }
      if (!l["cpu_phases"].empty()) {
        EXPECT_NEAR(sum, double(l["cpu_us_per_io"]), 1e-6) << words;
        EXPECT_TRUE(l["cpu_phases"].contains("other")) << words;
      }
      if (l["kind"] == "dedup") {
        EXPECT_FALSE(l["cpu_phases"].empty()) << words;
        EXPECT_NE(words.find(fmt::format("{:.2f} us CPU per I/O (", double(l["cpu_us_per_io"]))),
                  std::string::npos)
            << words;
      }
    }
  }
}

TEST_F(ReportTest, PerThreadAndPercentileTablesAndJsonAgree) {
  const std::string text = RenderText(*report_);
  const json j = RenderJson(*report_);
  for (const json& s : j["stacks"]) {
    const std::string name = s["name"];
    const int median_round = s["summary"]["median_round"];  // counted from 1, as in the text
    const json* run = nullptr;
    for (const json& r : s["rounds"]) {
      if (r["round"] == median_round) run = &r;
    }
    ASSERT_NE(run, nullptr);
    const std::string header = "Stack " + name + " - round " + std::to_string(median_round);
    const size_t at = text.find(header);
    ASSERT_NE(at, std::string::npos) << header;
    const std::string block = text.substr(at);
    // Total IO: one row per thread, then the total.
    const auto total = Section(block.substr(block.find("Total IO")), "Total IO");
    for (const json& th : (*run)["threads"]) {
      bool found = false;
      for (const std::string& line : total) {
        auto t = Split(line);
        if (t.size() == 7 && t[0] == std::to_string(int(th["index"]))) {
          found = true;
          EXPECT_EQ(Number(t[1]), double(th["total"]["bytes"]));
          EXPECT_EQ(Number(t[2]), double(th["total"]["ios"]));
          ExpectShows(t[4], th["total"]["iops"], 2, name + " thread IOPS");
          ExpectShows(t[5], th["total"]["latency_us"]["mean"], 1, name + " thread mean");
          ExpectShows(t[6], th["total"]["latency_us"]["stddev"], 1, name + " thread stddev");
        }
      }
      EXPECT_TRUE(found) << name << " thread " << th["index"];
    }
    const auto pct = Section(block.substr(block.find("%-ile")), "  ");
    int checked = 0;
    for (const std::string& line : pct) {
      auto t = Split(line);
      if (t.size() != 4) continue;
      const std::map<std::string, std::string> keys = {{"min", "min"},  {"50th", "p50"}, {"99th", "p99"},
                                                       {"3-nines", "p99.9"}, {"max", "max"}};
      auto k = keys.find(t[0]);
      if (k == keys.end()) continue;
      ExpectShows(t[1], (*run)["read"]["latency_us"][k->second], 1, name + " read " + t[0]);
      ExpectShows(t[2], (*run)["write"]["latency_us"][k->second], 1, name + " write " + t[0]);
      ExpectShows(t[3], (*run)["total"]["latency_us"][k->second], 1, name + " total " + t[0]);
      ++checked;
    }
    EXPECT_EQ(checked, 5) << name;
    EXPECT_GT(double((*run)["flush"]["ios"]), 0.0) << "--flush-interval 16 must flush";
    EXPECT_NE(block.find("Flush"), std::string::npos);
  }
}

TEST_F(ReportTest, ReportFolderHasEveryFileAndCompleteCharts) {
  testing::TempDir dir;
  const std::string out = dir.File("report");
  // A NUL byte would cut the folder's path short: the report written into another folder.
  Status cut = WriteReportDir(out + std::string(1, '\0') + "x", *report_);
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().message, "the report folder's path contains a NUL byte at position " +
                                     std::to_string(out.size()));
  EXPECT_FALSE(std::filesystem::exists(out));
  ASSERT_OK(WriteReportDir(out, *report_));
  for (const std::string& f : ReportFiles()) {
    EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
    EXPECT_GT(std::filesystem::file_size(out + "/" + f), 200u) << f;
  }
  std::ifstream in(out + "/report.json");
  const json j = json::parse(in);
  EXPECT_EQ(j["stacks"].size(), 4u);
  const std::string cdf = LatencyCdfSvg(*report_);
  EXPECT_EQ(cdf.rfind("<svg", 0), 0u);
  EXPECT_NE(cdf.find("</svg>"), std::string::npos);
  size_t lines = 0;
  for (size_t p = 0; (p = cdf.find("<polyline", p)) != std::string::npos; ++p) ++lines;
  EXPECT_EQ(lines, 4u);  // one CDF per stack
  EXPECT_NE(OverheadSvg(*report_).find("passthrough+memory:16M"), std::string::npos);
  EXPECT_NE(LayerCostSvg(*report_).find(">passthrough<"), std::string::npos);
  const std::string cpu = CpuCostSvg(*report_);
  EXPECT_NE(cpu.find(">passthrough<"), std::string::npos) << "a layer in the legend";
  EXPECT_NE(cpu.find("outside (engine, io_uring workers)"), std::string::npos);
  const std::string html = [&] {
    std::ifstream h(out + "/index.html");
    return std::string(std::istreambuf_iterator<char>(h), {});
  }();
  for (const char* ref :
       {"latency_cdf.svg", "overhead.svg", "layer_cost.svg", "cpu_cost.svg", "report.json"}) {
    EXPECT_NE(html.find(ref), std::string::npos) << ref;
  }
  // index.html carries every column and every cell of the text's tables.
  for (const ReportTable& t : ComparisonTables(*report_)) {
    for (const std::string& h : t.header) EXPECT_NE(html.find("<th>" + XmlEscape(h) + "</th>"), std::string::npos) << h;
    for (const auto& row : t.rows) {
      for (const std::string& c : row) EXPECT_NE(html.find(">" + XmlEscape(c) + "</td>"), std::string::npos) << c;
    }
  }
  // The overhead chart draws whiskers and marks what is not significant.
  const std::string overhead = OverheadSvg(*report_);
  EXPECT_NE(overhead.find("95% intervals"), std::string::npos);
  EXPECT_NE(overhead.find("stroke-dasharray=\"4,3\""), std::string::npos);
  EXPECT_EQ(XmlEscape("a<b&\"c\">"), "a&lt;b&amp;&quot;c&quot;&gt;");
  EXPECT_EQ(Num(1234567.891, 2), "1,234,567.89");
  EXPECT_EQ(Num(-999.6), "-1,000");
  EXPECT_EQ(Num(0.4), "0");
}

// The host's CPU Ready is in the noise table (text and index.html) and the JSON, the same
// number in both; where the kernel gives no schedstat it says "n/a" / null, never 0.
TEST_F(ReportTest, HostReadyIsTheSameInTextAndJsonAndNotAvailableIsNeverZero) {
  auto noise_cells = [](const BenchReport& r) {
    std::vector<std::vector<std::string>> rows;
    for (const std::string& line : Section(RenderText(r), "Noise per round")) {
      auto t = Split(line);
      if (t.size() == 5 && std::isdigit(static_cast<unsigned char>(t[0][0]))) rows.push_back(t);
    }
    return rows;
  };
  const json j = RenderJson(*report_);
  const auto rows = noise_cells(*report_);
  ASSERT_EQ(rows.size(), j["noise"].size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& v = j["noise"][i]["host_ready_pct"];
    if (v.is_null()) {
      EXPECT_EQ(rows[i][4], "n/a");
    } else {
      ExpectShows(rows[i][4], v, 2, "host RDY % of round " + rows[i][0]);
    }
  }
  for (const json& s : j["stacks"]) {
    for (const json& run : s["rounds"]) {
      const json& h = run["host_ready"];
      EXPECT_EQ(h["pct"], run["metrics"]["host_ready_pct"]);
      if (h["measured"]) {
        EXPECT_EQ(h["threads"], 2);  // --threads 2, no io_uring on memory
      }
    }
  }

  BenchReport none = *report_;
  for (bench::StackOutcome& o : none.result.stacks) {
    for (bench::RunResult& run : o.rounds) run.host_ready = bench::HostReady{};  // no schedstat
  }
  none.summary = bench::Summarize(none.result);
  const json jn = RenderJson(none);
  for (const json& n : jn["noise"]) EXPECT_TRUE(n["host_ready_pct"].is_null());
  for (const json& s : jn["stacks"]) {
    EXPECT_TRUE(s["summary"]["host_ready_pct"].is_null());
    for (const json& run : s["rounds"]) EXPECT_TRUE(run["metrics"]["host_ready_pct"].is_null());
  }
  const auto na = noise_cells(none);
  ASSERT_FALSE(na.empty());
  for (const auto& row : na) EXPECT_EQ(row[4], "n/a");
  EXPECT_NE(RenderText(none).find("host CPU Ready: n/a"), std::string::npos);
}

// Each round's scheduler counts are in the JSON (a sweep's spread); null without a scheduler.
TEST(ReportCpuReady, EachRoundCarriesItsSchedulerCounts) {
  BenchReport r;
  r.summary.stacks.resize(2);
  r.result.stacks.resize(2);
  bench::RunResult with;
  with.knobs.quantum_ns = 4'000'000;
  with.yields.yields = 7;
  with.yields.wait_ns = 3'500'000;
  with.yields.max_wait_ns = 1'250'000;
  with.yields.signal_wait_ns = 3'400'000;
  with.yields.stalls = 2;
  with.yields.stalled_ns = 9'000'000;
  with.yields.max_stall_ns = 5'000'000;
  r.result.stacks[0].rounds = {with};
  r.result.stacks[1].rounds = {bench::RunResult{}};
  const json j = RenderJson(r);
  const json& y = j["stacks"][0]["rounds"][0]["scheduler"];
  EXPECT_EQ(y["yields"], 7);
  EXPECT_EQ(y["wait_ms"], 3.5);
  EXPECT_EQ(y["max_wait_ms"], 1.25);
  EXPECT_EQ(y["signal_wait_ms"], 3.4);
  EXPECT_EQ(y["stalls"], 2);
  EXPECT_EQ(y["stalled_ms"], 9.0);
  EXPECT_EQ(y["max_stall_ms"], 5.0);
  EXPECT_TRUE(j["stacks"][1]["rounds"][0]["scheduler"].is_null());
}

// A --cpu-ready sweep's report as the matrix leaves it, without rounds: RDY% 1.2, 5.1 and 28.4,
// injected 0.05 points under the set value, yields 10 x RDY% and wait 20 x RDY% (growth 1.00,
// 4.25, 23.67).
BenchReport SweepReport() {
  BenchReport r;
  r.result.knobs.quantum_ns = 4'000'000;
  for (double pct : {1.2, 5.1, 28.4}) {
    bench::StackSummary s;
    s.name = fmt::format("ready {}", pct);
    s.runs = 3;
    s.cpu_ready_pct = pct;
    s.ready_stalled_pct = pct - 0.05;
    s.yields = 10 * pct;
    s.yield_wait_ms = 20 * pct;
    r.summary.stacks.push_back(s);
    bench::StackOutcome o;  // the result behind the summary
    o.plan.name = s.name;
    r.result.stacks.push_back(o);
  }
  return r;
}

// A --cpu-ready sweep's chart draws each row's growth against the control beside the
// published table's, and the report folder has it only for a sweep.
TEST(ReportCpuReady, SweepChartShowsEachGrowthBesideThePublishedOne) {
  const BenchReport r = SweepReport();
  const std::vector<CpuReadyGrowth> rows = CpuReadyGrowthRows(r.result, r.summary);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows[1].yields_x, 4.25);
  EXPECT_TRUE(std::isnan(rows[1].duration_x)) << "no rounds: no duration, not 0";
  EXPECT_NEAR(rows[2].published_yields_x, 10455.0 / 1392, 1e-9);
  const std::string svg = CpuReadySvg(r);
  for (const char* shown : {">4.25<", ">23.67<", ">1.81<", ">7.51<", ">23.50<", ">2.60<",
                            ">RDY 28.4%<"}) {
    EXPECT_NE(svg.find(shown), std::string::npos) << shown;
  }
  testing::TempDir dir;
  ASSERT_OK(WriteReportDir(dir.File("sweep"), r));
  EXPECT_TRUE(std::filesystem::exists(dir.File("sweep") + "/cpu_ready.svg"));
  BenchReport single = r;
  single.summary.stacks.resize(1);
  single.result.stacks.resize(1);
  EXPECT_TRUE(CpuReadyGrowthRows(single.result, single.summary).empty());
  ASSERT_OK(WriteReportDir(dir.File("single"), single));
  EXPECT_FALSE(std::filesystem::exists(dir.File("single") + "/cpu_ready.svg"));
}

// A --cpu-ready sweep shows the host's CPU Ready next to the injected one, and warns when the
// host's exceeds the smallest injected RDY%: then the host sets the ratios.
TEST(ReportCpuReady, HostReadyAboveTheSmallestInjectedIsWarnedAbout) {
  const BenchReport r = SweepReport();  // injected: 1.15, 5.05, 28.35
  auto with_host = [&](double a, double b, double c) {
    BenchReport x = r;
    x.summary.stacks[0].host_ready_pct = a;
    x.summary.stacks[1].host_ready_pct = b;
    x.summary.stacks[2].host_ready_pct = c;
    return x;
  };
  const BenchReport loaded = with_host(0.9, 3.25, 2.0);  // the largest, 3.25%, counts
  EXPECT_EQ(CpuReadyWarning(loaded.result, loaded.summary),
            "the host's own CPU Ready (3.25%) exceeds the injected 1.15%: the sweep's ratios are "
            "not the injected stalls'");
  const auto tables = CpuReadyTables(loaded);
  ASSERT_EQ(tables.size(), 2u);
  ASSERT_EQ(tables[0].header[3], "host RDY%");
  EXPECT_EQ(tables[0].rows[1][3], "3.25");
  EXPECT_NE(tables[0].legend.find("WARNING: the host's own CPU Ready (3.25%)"), std::string::npos);
  std::string text;  // the text report, its wrapped lines joined
  for (const std::string& w : Split(RenderPresetTables(loaded))) text += w + " ";
  EXPECT_NE(text.find("WARNING: " + CpuReadyWarning(loaded.result, loaded.summary) + "."), std::string::npos) << text;
  EXPECT_EQ(PresetTablesJson(loaded)["cpu_ready"]["warning"], CpuReadyWarning(loaded.result, loaded.summary));
  EXPECT_EQ(PresetTablesJson(loaded)["cpu_ready"]["vstack"][1]["host_ready_pct"], 3.25);

  const BenchReport quiet = with_host(0.2, 0.3, 1.1);  // below every injected RDY%
  EXPECT_EQ(CpuReadyWarning(quiet.result, quiet.summary), "");
  EXPECT_TRUE(PresetTablesJson(quiet)["cpu_ready"]["warning"].is_null());
  EXPECT_EQ(CpuReadyTables(quiet)[0].legend.find("WARNING"), std::string::npos);

  // A control without yields: its growth ratios are undefined, shown as "-", never 0.
  BenchReport no_control_yields = quiet;
  no_control_yields.summary.stacks[0].yields = 0;
  no_control_yields.summary.stacks[0].yield_wait_ms = 0;
  const auto growth = CpuReadyTables(no_control_yields)[1];
  EXPECT_EQ(growth.rows[0][1], "-");
  EXPECT_EQ(growth.rows[0][4], "-");
  EXPECT_EQ(growth.rows[2][2], "-");
  EXPECT_EQ(CpuReadyTables(quiet)[1].rows[2][1], "23.67");  // 284 / 12 yields

  const BenchReport unknown = with_host(-1, -1, -1);  // no schedstat: n/a, and no warning
  EXPECT_EQ(CpuReadyWarning(unknown.result, unknown.summary), "");
  EXPECT_EQ(CpuReadyTables(unknown)[0].rows[0][3], "n/a");
  EXPECT_TRUE(PresetTablesJson(unknown)["cpu_ready"]["vstack"][0]["host_ready_pct"].is_null());
}

// A layer whose self time is below the timestamp resolution (one clock read per batch) gets a
// visible marker and words in layer_cost.svg, not a bar of width 0 labelled "0.00".
TEST(ReportCharts, ALayerBelowTheTimestampResolutionIsMarkedNotDrawnAsZero) {
  BenchReport r;
  bench::StackSummary s;
  s.name = "passthrough";
  s.runs = 1;
  s.attribution.timed = true;
  bench::LayerCost layer, dev;
  layer.kind = "passthrough";
  dev.kind = "memory";
  dev.backend = true;
  dev.self_us_per_io = 26;
  dev.self_resolved = true;
  s.attribution.layers = {layer, dev};
  r.summary.stacks.push_back(s);
  const std::string svg = LayerCostSvg(r);
  EXPECT_EQ(svg.find(">0.00<"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">below the timestamp resolution: see CPU per I/O<"), std::string::npos)
      << svg;
  size_t dashed = 0;  // the marker, and its legend entry
  for (size_t p = 0; (p = svg.find("stroke-dasharray=\"4,3\"", p)) != std::string::npos; ++p)
    ++dashed;
  EXPECT_EQ(dashed, 2u) << svg;
}

// The CDF's latency axis starts at the decade below the fastest I/O; its tick labels sit one
// decade apart and never on top of each other (they once did when the fastest I/O was just
// under a decade, e.g. 0.8 us: "0.1 us" was drawn at 0.8 us, next to "1 us").
TEST(ReportCharts, LatencyCdfTickLabelsDoNotOverlap) {
  BenchReport r;
  bench::StackSummary s;
  s.name = "fresh";
  s.runs = 1;
  s.latency.Record(800);        // 0.8 us: a zero-filled read
  s.latency.Record(5'000'000);  // 5 ms
  r.summary.stacks.push_back(s);
  const std::string svg = LatencyCdfSvg(r);
  std::vector<std::pair<double, std::string>> ticks;  // x, label
  const std::string open = "<text x=\"";
  for (size_t p = 0; (p = svg.find(open, p)) != std::string::npos; ++p) {
    const double x = std::stod(svg.substr(p + open.size()));
    const size_t b = svg.find('>', p) + 1, e = svg.find("</text>", b);
    const std::string label = svg.substr(b, e - b);
    if (label.size() > 3 && (label.ends_with(" us") || label.ends_with(" ms"))) ticks.emplace_back(x, label);
  }
  ASSERT_EQ(ticks.size(), 6u);  // 0.1 us, 1 us, 10 us, 100 us, 1 ms, 10 ms
  EXPECT_EQ(ticks.front().second, "0.1 us");
  for (size_t i = 1; i < ticks.size(); ++i) {
    EXPECT_GT(ticks[i].first - ticks[i - 1].first, 60) << ticks[i - 1].second << " / " << ticks[i].second;
  }
}

}  // namespace
}  // namespace vstack::bench
