// cpu_cost.svg: the CPU per guest I/O of every stack, stacked by layer as the sampler charged it
// (bench/workload/attribution.h), the share outside every layer in grey, and a mark at the CPU
// the process measured, so a reader sees where the CPU went and whether the parts add up.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench/report/charts.h"
#include "bench/report/svg.h"

namespace vstack::bench {
namespace {

const char kOutsideColor[] = "#b0b0b0";

// The layer kinds of the stacks, in order of appearance: the layers above the backends first (in
// layer_cost.svg's order, so a layer has the same colour in both charts), then the backends.
std::vector<std::string> Kinds(const std::vector<const bench::StackSummary*>& stacks) {
  std::vector<std::string> kinds, backends;
  for (const auto* s : stacks) {
    for (const bench::LayerCost& c : s->attribution.layers) {
      auto& list = c.backend ? backends : kinds;
      if (std::find(list.begin(), list.end(), c.kind) == list.end()) list.push_back(c.kind);
    }
  }
  for (const std::string& b : backends) {
    if (std::find(kinds.begin(), kinds.end(), b) == kinds.end()) kinds.push_back(b);
  }
  return kinds;
}

}  // namespace

std::string CpuCostSvg(const BenchReport& r) {
  const auto stacks = Measured(r);
  const std::vector<std::string> kinds = Kinds(stacks);
  const int row = 30, T = 60, L = LabelWidth(stacks), pw = 560, right = 250;
  const int legend = 24 * ((int(kinds.size()) + 1 + 3) / 4) + 30;
  const int W = L + pw + right, H = T + 40 + legend + row * std::max<int>(1, int(stacks.size()));
  const std::string title = "CPU per guest I/O by layer (sampled), outside every layer in grey";
  if (stacks.empty()) return NoData(W, H, title);
  double hi = 0;
  for (const auto* s : stacks) {
    hi = std::max({hi, s->attribution.cpu_sum_us_per_io, s->attribution.cpu_total_us_per_io});
  }
  const Axis axis = NiceAxis(0, hi * 1.05);
  auto X = [&](double us) { return L + us / axis.hi * pw; };
  std::string svg = Header(W, H, title);
  svg += Text(L + pw / 2.0, T - 14, "us of CPU per guest I/O (the black mark: the CPU measured)",
              "middle", 13);
  const double bottom = T + row * double(stacks.size());
  for (double v = 0; v <= axis.hi + axis.step / 2; v += axis.step) {
    svg += Line(X(v), T - 6, X(v), bottom);
    svg += Text(X(v), bottom + 16, fmt::format("{:g}", v), "middle", 11);
  }
  auto kind_color = [&](const std::string& k) {
    return Color(size_t(std::find(kinds.begin(), kinds.end(), k) - kinds.begin()));
  };
  for (size_t i = 0; i < stacks.size(); ++i) {
    const bench::Attribution& a = stacks[i]->attribution;
    const double y = T + row * double(i), mid = y + row / 2.0;
    svg += Text(L - 8, mid + 4, Label(stacks[i]->name), "end");
    if (!a.cpu_sampled) {
      svg += Text(L + 4, mid + 4, "CPU per layer not sampled", "start", 10, "fill=\"#666\"");
      continue;
    }
    double x = X(0);
    auto segment = [&](double us, const char* color) {
      const double w = X(us) - X(0);
      svg += Rect(x, y + 5, w, row - 10, color);
      if (x > X(0) && w > 0) svg += Line(x, y + 5, x, y + row - 5, "white", 1.5);
      x += w;
    };
    for (const bench::LayerCost& c : a.layers) segment(c.cpu_us_per_io, kind_color(c.kind));
    segment(a.outside_cpu_us_per_io, kOutsideColor);
    const double mark = X(a.cpu_total_us_per_io);
    svg += Line(mark, y + 2, mark, y + row - 2, "#000", 2);
    const std::string label =
        fmt::format("{:.2f} vs {:.2f} measured ({:+.1f}%){}", a.cpu_sum_us_per_io,
                    a.cpu_total_us_per_io, a.cpu_residual_pct,
                    a.cpu_adds_up ? "" : ": does not add up");
    svg += Text(std::max(x, mark) + 6, mid + 4, label, "start", 10,
                a.cpu_adds_up ? "" : "fill=\"#c00\"");
  }
  for (size_t i = 0; i <= kinds.size(); ++i) {
    const double lx = L + double(i % 4) * 170, ly = bottom + 40 + 24 * double(i / 4);
    const bool outside = i == kinds.size();
    svg += Rect(lx, ly - 10, 14, 14, outside ? kOutsideColor : kind_color(kinds[i]));
    svg += Text(lx + 20, ly + 2, outside ? "outside (engine, io_uring workers)" : kinds[i]);
  }
  return svg + "</svg>\n";
}

}  // namespace vstack::bench
