#include "bench/report/report_dir.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "bench/report/charts.h"
#include "bench/report/report.h"
#include "lib/spec.h"
#include "lib/xml_escape.h"

namespace vstack::bench {
namespace {

// Written beside its final name and renamed over it: a reader (or a run killed meanwhile)
// sees the old file or the new one, never half of one.
Status WriteFile(const std::string& path, const std::string& content) {
  const std::string part = path + ".part";
  std::ofstream f(part, std::ios::binary | std::ios::trunc);
  f << content;
  f.close();
  if (!f || std::rename(part.c_str(), path.c_str()) != 0) {
    const int err = errno ? errno : EIO;
    std::remove(part.c_str());
    return MakeError(SystemError(err), "cannot write '" + path + "': " + std::strerror(err));
  }
  return OkStatus();
}

std::string IndexHtml(const BenchReport& r) {
  std::string h = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>vstack bench</title>\n"
                  "<style>body{font-family:sans-serif;margin:2em;max-width:1100px}"
                  "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;"
                  "text-align:right}td:first-child,th:first-child{text-align:left}"
                  "pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:12px}"
                  "img{max-width:100%;margin:1em 0}</style></head><body>\n";
  h += "<h1>vstack bench</h1>\n<p><code>" + XmlEscape(r.command) + "</code></p>\n";
  h += "<p>" + XmlEscape(bench::DescribeWorkload(r.result.knobs)) + "; content " +
       XmlEscape(bench::DescribeContent(r.result.knobs)) + "; " +
       std::to_string(r.result.rounds_done) + " interleaved round(s).";
  if (r.result.interrupted) h += " <b>Interrupted: partial results.</b>";
  h += "</p>\n<p>Files: <a href=\"report.txt\">report.txt</a> (full text), "
       "<a href=\"report.json\">report.json</a> (every round).</p>\n";
  std::vector<ReportTable> tables = ComparisonTables(r);
  for (ReportTable& t : CpuReadyTables(r)) tables.push_back(std::move(t));
  for (const ReportTable& t : tables) {
    h += "<h2>" + XmlEscape(t.title) + "</h2>\n<table><tr>";
    for (const std::string& c : t.header) h += "<th>" + XmlEscape(c) + "</th>";
    h += "</tr>\n";
    for (const auto& row : t.rows) {
      h += "<tr>";
      for (size_t c = 0; c < row.size(); ++c) {
        const bool last = c + 1 == row.size() && row.size() < t.header.size();
        h += last ? fmt::format("<td colspan=\"{}\" style=\"text-align:left\">{}</td>",
                                t.header.size() - c, XmlEscape(row[c]))
                  : "<td>" + XmlEscape(row[c]) + "</td>";
      }
      h += "</tr>\n";
    }
    h += "</table>\n<p>" + XmlEscape(t.legend) + "</p>\n";
  }
  h += "<h2>Charts</h2>\n<img src=\"latency_cdf.svg\" alt=\"latency CDF\">\n"
       "<img src=\"overhead.svg\" alt=\"overhead\">\n<img src=\"layer_cost.svg\" alt=\"layer cost\">\n"
       "<img src=\"cpu_cost.svg\" alt=\"CPU per layer\">\n";
  if (!CpuReadyGrowthRows(r.result, r.summary).empty()) h += "<img src=\"cpu_ready.svg\" alt=\"CPU Ready sweep\">\n";
  h += "<h2>Gaps, layer by layer</h2>\n<ul>\n";
  for (const bench::StackSummary& s : r.summary.stacks) {
    if (s.runs == 0) continue;
    h += "<li><b>" + XmlEscape(s.name) + "</b>: " + XmlEscape(s.gap) + "<ul>\n";
    for (const bench::LayerCost& c : s.attribution.layers) h += "<li>" + XmlEscape(c.words) + "</li>\n";
    if (!s.attribution.cpu_words.empty()) h += "<li>" + XmlEscape(s.attribution.cpu_words) + "</li>\n";
    h += "</ul></li>\n";
  }
  h += "</ul>\n<h2>Full text report</h2>\n<pre>" + XmlEscape(RenderText(r)) + "</pre>\n</body></html>\n";
  return h;
}

}  // namespace

const std::vector<std::string>& ReportFiles() {
  static const std::vector<std::string> files = {"index.html", "report.txt", "report.json",
                                                 "latency_cdf.svg", "overhead.svg", "layer_cost.svg",
                                                 "cpu_cost.svg"};
  return files;
}

Status PrepareReportDir(const std::string& dir) {
  if (dir.empty()) return MakeError(Errc::kInvalidArgument, "the report folder is an empty path");
  VSTACK_RETURN_IF_ERROR(RefuseNul(dir, Errc::kInvalidArgument, "report folder's path"));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return MakeError(ec, "cannot create the report folder '" + dir + "': " + ec.message());
  if (!std::filesystem::is_directory(dir, ec)) {
    return MakeError(Errc::kInvalidArgument, "the report folder '" + dir + "' is not a folder");
  }
  const std::string probe = dir + "/.vstack-write-test";
  VSTACK_RETURN_IF_ERROR(WriteFile(probe, ""));
  std::remove(probe.c_str());
  return OkStatus();
}

Status WriteReportDir(const std::string& dir, const BenchReport& r) {
  VSTACK_RETURN_IF_ERROR(PrepareReportDir(dir));
  VSTACK_RETURN_IF_ERROR(WriteFile(dir + "/report.txt", RenderText(r)));
  VSTACK_RETURN_IF_ERROR(WriteFile(dir + "/report.json", RenderJson(r).dump(2) + "\n"));
  VSTACK_RETURN_IF_ERROR(WriteFile(dir + "/latency_cdf.svg", LatencyCdfSvg(r)));
  VSTACK_RETURN_IF_ERROR(WriteFile(dir + "/overhead.svg", OverheadSvg(r)));
  VSTACK_RETURN_IF_ERROR(WriteFile(dir + "/layer_cost.svg", LayerCostSvg(r)));
  VSTACK_RETURN_IF_ERROR(WriteFile(dir + "/cpu_cost.svg", CpuCostSvg(r)));
  if (!CpuReadyGrowthRows(r.result, r.summary).empty()) {
    VSTACK_RETURN_IF_ERROR(WriteFile(dir + "/cpu_ready.svg", CpuReadySvg(r)));
  } else {
    std::remove((dir + "/cpu_ready.svg").c_str());  // an earlier run's, which index.html no longer shows
  }
  return WriteFile(dir + "/index.html", IndexHtml(r));
}

}  // namespace vstack::bench
