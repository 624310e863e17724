#include "bench/report/charts.h"

#include "bench/report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace vstack::bench {

std::string LatencyCdfSvg(const BenchReport& r) {
  const auto stacks = Measured(r);
  const int R = 60 + LabelWidth(stacks), W = 700 + R, L = 80, T = 44, B = 64;
  const int H = std::max(540, T + B + 20 * int(stacks.size()) + 20);
  const std::string title = "Latency CDF per stack (reads + writes, all rounds)";
  if (stacks.empty()) return NoData(W, H, title);
  double lo = INFINITY, hi = 0;
  uint64_t max_count = 0;
  for (const auto* s : stacks) {
    lo = std::min(lo, std::max(0.001, double(s->latency.min()) / 1000));
    hi = std::max(hi, double(s->latency.max()) / 1000);
    max_count = std::max(max_count, s->latency.count());
  }
  const double x0 = std::floor(std::log10(lo)), x1 = std::max(x0 + 1, std::ceil(std::log10(hi)));
  // y = -log10(1 - p): 0 at 0%, 1 at 90%, 2 at 99% ... up to what the sample count resolves.
  const double ymax = std::clamp(std::ceil(std::log10(double(std::max<uint64_t>(max_count, 10)))), 2.0, 6.0);
  const double pw = W - L - R, ph = H - T - B;
  // Clamp to the axis's first decade, not to `lo`: clamping to `lo` drew the first tick label
  // (e.g. "0.1 us") on top of the next one when the fastest I/O was just under a decade.
  auto X = [&](double us) { return L + (std::log10(std::max(us, std::pow(10, x0))) - x0) / (x1 - x0) * pw; };
  auto Y = [&](double q) { return T + ph - std::min(q, ymax) / ymax * ph; };
  std::string svg = Header(W, H, title);
  for (double e = x0; e <= x1 + 1e-9; e += 1) {
    svg += Line(X(std::pow(10, e)), T, X(std::pow(10, e)), T + ph);
    svg += Text(X(std::pow(10, e)), T + ph + 18, UsLabel(std::pow(10, e)), "middle");
    for (int m = 2; m < 10 && e < x1; ++m) {
      const double v = m * std::pow(10, e);
      svg += Line(X(v), T, X(v), T + ph, "#eee");
    }
  }
  const std::vector<std::pair<double, const char*>> ticks = {
      {0, "0%"}, {std::log10(2.0), "50%"}, {1, "90%"}, {2, "99%"}, {3, "99.9%"},
      {4, "99.99%"}, {5, "99.999%"}, {6, "99.9999%"}};
  for (const auto& [q, label] : ticks) {
    if (q > ymax + 1e-9) break;
    svg += Line(L, Y(q), L + pw, Y(q));
    svg += Text(L - 6, Y(q) + 4, label, "end");
  }
  svg += Line(L, T + ph, L + pw, T + ph, "#333");
  svg += Line(L, T, L, T + ph, "#333");
  svg += Text(L + pw / 2, H - 18, "latency (submit to completion, log scale)", "middle", 13);
  svg += Text(18, T + ph / 2, "percentile", "middle", 13,
              fmt::format("transform=\"rotate(-90 18 {:.0f})\"", T + ph / 2).c_str());
  for (size_t i = 0; i < stacks.size(); ++i) {
    const LatencyHistogram& h = stacks[i]->latency;
    const double n = double(h.count());
    std::string pts = fmt::format("{:.1f},{:.1f}", X(double(h.min()) / 1000), Y(0));
    uint64_t cum = 0;
    for (int b = 0; b < LatencyHistogram::kBuckets; ++b) {
      const uint64_t c = h.bucket_count(b);
      if (c == 0) continue;
      cum += c;
      const double hi_us = std::min<double>(LatencyHistogram::BucketLow(b) + LatencyHistogram::BucketWidth(b),
                                            double(h.max())) / 1000;
      const double p = double(cum) / n;
      const double q = p >= 1 ? ymax : -std::log10(1 - p);
      pts += fmt::format(" {:.1f},{:.1f}", X(hi_us), Y(q));
    }
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                       Color(i), pts);
    const double ly = T + 10 + 20 * double(i);
    svg += Line(L + pw + 16, ly, L + pw + 40, ly, Color(i), 3);
    svg += Text(L + pw + 46, ly + 4, Label(stacks[i]->name));
  }
  return svg + "</svg>\n";
}

std::string OverheadSvg(const BenchReport& r) {
  const auto stacks = Measured(r);
  const int row = 30, T = 70, B = 70, L = LabelWidth(stacks), gap = 110, pw = 330;
  const int H = T + B + row * std::max<int>(1, int(stacks.size())), W = L + 2 * pw + gap + 110;
  const std::string base = r.summary.baseline;
  const std::string title = "IOPS and efficiency overhead vs " + (base.empty() ? "baseline" : base) +
                            " (95% intervals)";
  if (stacks.empty()) return NoData(W, H, title);
  double max_ratio = 1.0, max_over = 1.0, min_over = 0.0;
  for (const auto* s : stacks) {
    max_ratio = std::max(max_ratio, s->iops_ratio.high);
    if (s->efficiency_ratio.n) {
      max_over = std::max(max_over, (1 - s->efficiency_ratio.low) * 100);
      min_over = std::min(min_over, (1 - s->efficiency_ratio.high) * 100);
    }
  }
  const Axis ra = NiceAxis(0, max_ratio * 1.05);
  const Axis oa = NiceAxis(min_over, max_over * 1.05);
  max_ratio = ra.hi;
  min_over = oa.lo;
  max_over = oa.hi;
  std::string svg = Header(W, H, title);
  const double ax = L, bx = L + pw + gap;
  svg += Text(ax + pw / 2, T - 26, "IOPS / " + base + " IOPS (paired per round)", "middle", 13);
  svg += Text(bx + pw / 2, T - 26, "efficiency overhead % (IOPS per CPU-second)", "middle", 13);
  auto XA = [&](double v) { return ax + v / max_ratio * pw; };
  auto XB = [&](double v) { return bx + (v - min_over) / (max_over - min_over) * pw; };
  const double bottom = T + row * double(stacks.size());
  for (double v = ra.lo; v <= ra.hi + ra.step / 2; v += ra.step) {
    svg += Line(XA(v), T - 6, XA(v), bottom);
    svg += Text(XA(v), bottom + 16, fmt::format("{:g}", v), "middle", 11);
  }
  for (double o = oa.lo; o <= oa.hi + oa.step / 2; o += oa.step) {
    svg += Line(XB(o), T - 6, XB(o), bottom);
    svg += Text(XB(o), bottom + 16, fmt::format("{:g}%", o), "middle", 11);
  }
  for (size_t i = 0; i < stacks.size(); ++i) {
    const auto* s = stacks[i];
    const double y = T + row * double(i), mid = y + row / 2.0;
    svg += Text(L - 8, mid + 4, Label(s->name), "end");
    const bench::RatioInterval& q = s->iops_ratio;
    const bool q_sure = s->baseline || q.significant;
    svg += Bar(ax, XA(q.estimate), y + 5, row - 10, Color(i), q_sure);
    if (q.has_interval() && !s->baseline) svg += Whisker(XA(q.low), XA(q.high), mid);
    const std::string ql = s->baseline       ? "baseline"
                           : q.significant   ? fmt::format("{:.3f}x", q.estimate)
                                             : fmt::format("{:.3f}x n.s.", q.estimate);
    svg += Text(std::max(XA(q.estimate), XA(q.high)) + 6, mid + 4, ql, "start", 10);
    const bench::RatioInterval& e = s->efficiency_ratio;
    const double o = std::fabs(s->overhead_vs_base) < 0.0005 ? 0.0 : s->overhead_vs_base * 100;
    const bool e_sure = s->baseline || e.significant;
    svg += Bar(XB(0), XB(o), y + 5, row - 10, Color(i), e_sure);
    if (e.has_interval() && !s->baseline) svg += Whisker(XB((1 - e.high) * 100), XB((1 - e.low) * 100), mid);
    const std::string el = s->baseline ? "" : fmt::format("{:.1f}%{}", o, e_sure ? "" : " n.s.");
    svg += Text(std::max({XB(0), XB(o), e.has_interval() ? XB((1 - e.low) * 100) : 0.0}) + 6, mid + 4, el,
                "start", 10);
  }
  svg += Line(XA(1), T - 6, XA(1), bottom, "#000", 1, "4,3");
  svg += Line(XB(0), T - 6, XB(0), bottom, "#000", 1);
  // The legend: what a solid and a pale bar mean.
  const double ly = bottom + 40;
  svg += Rect(L, ly - 10, 14, 12, "#555");
  svg += Text(L + 20, ly, "significant: the 95% interval (whisker) excludes no change");
  svg += Bar(L + 380, L + 394, ly - 10, 12, "#555", false);
  svg += Text(L + 400, ly, "n.s.: not significant (interval includes no change)");
  return svg + "</svg>\n";
}

// The width of the marker of a layer whose self time is below the timestamp resolution.
constexpr double kMarker = 10;

std::string LayerCostSvg(const BenchReport& r) {
  const auto stacks = Measured(r);
  const int row = 30, T = 70, L = LabelWidth(stacks), gap = 110, pw = 330;
  std::vector<std::string> kinds;  // non-backend layer kinds, in order of appearance
  for (const auto* s : stacks) {
    for (const bench::LayerCost& c : s->attribution.layers) {
      if (!c.backend && std::find(kinds.begin(), kinds.end(), c.kind) == kinds.end()) kinds.push_back(c.kind);
    }
  }
  // One more legend row explains the marker of a layer below the timestamp resolution.
  const int legend = 24 * ((int(kinds.size()) + 3) / 4) + 24;
  // The right margin holds the label after the longest device bar ("2271.5 (uring)").
  const int H = T + 50 + legend + row * std::max<int>(1, int(stacks.size())), W = L + 2 * pw + gap + 110;
  const std::string title = "Self time per guest I/O (means; they add up to the latency): each layer, and the device";
  if (stacks.empty()) return NoData(W, H, title);
  double max_layers = 0, max_dev = 0;
  for (const auto* s : stacks) {
    max_layers = std::max(max_layers, s->attribution.layers_us_per_io);
    if (!s->attribution.layers.empty()) {
      max_dev = std::max(max_dev, s->attribution.layers.back().self_us_per_io);
    }
  }
  bool any_marker = false;  // some layer is below the timestamp resolution: explain its marker
  const Axis la = NiceAxis(0, max_layers * 1.05), da = NiceAxis(0, max_dev * 1.05);
  max_layers = la.hi;
  max_dev = da.hi;
  std::string svg = Header(W, H, title);
  const double ax = L, bx = L + pw + gap;
  svg += Text(ax + pw / 2, T - 26, "us of self time in the layers above the device (stacked)", "middle", 13);
  svg += Text(bx + pw / 2, T - 26, "us in the device (backend), per guest I/O", "middle", 13);
  const double bottom = T + row * double(stacks.size());
  for (double a = 0; a <= la.hi + la.step / 2; a += la.step) {
    const double xa = ax + a / max_layers * pw;
    svg += Line(xa, T - 6, xa, bottom);
    svg += Text(xa, bottom + 16, fmt::format("{:g}", a), "middle", 11);
  }
  for (double b = 0; b <= da.hi + da.step / 2; b += da.step) {
    const double xb = bx + b / max_dev * pw;
    svg += Line(xb, T - 6, xb, bottom);
    svg += Text(xb, bottom + 16, fmt::format("{:g}", b), "middle", 11);
  }
  auto kind_color = [&](const std::string& k) {
    return Color(size_t(std::find(kinds.begin(), kinds.end(), k) - kinds.begin()));
  };
  for (size_t i = 0; i < stacks.size(); ++i) {
    const auto* s = stacks[i];
    const double y = T + row * double(i);
    svg += Text(L - 8, y + row / 2.0 + 4, Label(s->name), "end");
    const bench::Attribution& a = s->attribution;
    double x = ax;
    std::vector<const bench::LayerCost*> unresolved;  // drawn as markers after the bars
    for (const bench::LayerCost& c : a.layers) {
      if (c.backend) {
        const double w = c.self_us_per_io / max_dev * pw;
        svg += Rect(bx, y + 5, w, row - 10, "#888");
        svg += Text(bx + w + 4, y + row / 2.0 + 4,
                    fmt::format("{:.1f} ({})", c.self_us_per_io, c.kind), "start", 10);
        continue;
      }
      if (a.timed && !c.self_resolved) {
        unresolved.push_back(&c);
        continue;
      }
      const double w = c.self_us_per_io / max_layers * pw;
      svg += Rect(x, y + 5, w, row - 10, kind_color(c.kind));
      if (x > ax) svg += Line(x, y + 5, x, y + row - 5, "white", 2);  // layer boundary
      x += w;
    }
    // A layer below the timestamp resolution has no time to draw: a dashed box marks it,
    // instead of a bar of width 0.
    for (const bench::LayerCost* c : unresolved) {
      x += 2;
      svg += Bar(x, x + kMarker, y + 5, row - 10, kind_color(c->kind), false);
      x += kMarker;
      any_marker = true;
    }
    if (a.layers.size() > 1) {
      const bool any_resolved = unresolved.size() + 1 < a.layers.size();
      const std::string label =
          !a.timed       ? std::string("not timed (counters only)")
          : any_resolved ? fmt::format("{:.2f}", a.layers_us_per_io)
                         : std::string("below the timestamp resolution: see CPU per I/O");
      svg += Text(x + 4, y + row / 2.0 - 2, label, "start", 10);
      if (a.measured_us > 0) {  // what the bars add up to, against the measurement
        svg += Text(x + 4, y + row / 2.0 + 9, fmt::format("residual {:+.1f}%", a.residual_pct),
                    "start", 9, "fill=\"#666\"");
      }
    }
  }
  for (size_t i = 0; i < kinds.size(); ++i) {
    const double lx = L + double(i % 4) * 160, ly = bottom + 36 + 24 * double(i / 4);
    svg += Rect(lx, ly - 10, 14, 14, kind_color(kinds[i]));
    svg += Text(lx + 20, ly + 2, kinds[i]);
  }
  if (any_marker) {
    const double my = bottom + 36 + 24 * double((kinds.size() + 3) / 4);
    svg += Bar(L, L + kMarker, my - 10, 14, "#555", false);
    svg += Text(L + kMarker + 8, my + 2,
                "self time below the timestamp resolution (one clock read per batch): the "
                "layer's cost shows in CPU per I/O, not as time");
  }
  return svg + "</svg>\n";
}

// Three panels (yield waits, wait time, duration), each with one group per RDY% row: vstack's
// growth against its control beside the published table's. Vertical bars, a shared scale per
// panel, the value on top of each bar.
std::string CpuReadySvg(const BenchReport& r) {
  const std::vector<CpuReadyGrowth> rows = CpuReadyGrowthRows(r.result, r.summary);
  const int pw = 300, gap = 60, L = 60, T = 78, B = 86, ph = 300;
  const int W = L + 3 * pw + 2 * gap + 30, H = T + ph + B;
  const std::string title = "CPU Ready sweep: growth against the control, vstack beside the "
                            "published vSphere / SQL Server table";
  if (rows.empty()) return NoData(W, H, title);
  struct Panel {
    const char* name;
    double CpuReadyGrowth::*ours;
    double CpuReadyGrowth::*theirs;
  };
  const Panel panels[] = {
      {"yield waits (count) x", &CpuReadyGrowth::yields_x, &CpuReadyGrowth::published_yields_x},
      {"yield wait time x", &CpuReadyGrowth::wait_x, &CpuReadyGrowth::published_wait_x},
      {"duration x", &CpuReadyGrowth::duration_x, &CpuReadyGrowth::published_duration_x},
  };
  const char* ours_color = Color(0);
  const char* theirs_color = "#9a9a9a";
  std::string svg = Header(W, H, title);
  const double bottom = T + ph;
  for (size_t p = 0; p < 3; ++p) {
    const Panel& panel = panels[p];
    double hi = 1;
    for (const CpuReadyGrowth& g : rows) {
      if (std::isfinite(g.*panel.ours)) hi = std::max(hi, g.*panel.ours);
      if (g.has_published) hi = std::max(hi, g.*panel.theirs);
    }
    const Axis a = NiceAxis(0, hi * 1.08);
    const double x0 = L + double(p) * (pw + gap);
    auto Y = [&](double v) { return bottom - v / a.hi * ph; };
    svg += Text(x0 + pw / 2.0, T - 20, panel.name, "middle", 13, "font-weight=\"bold\"");
    for (double v = a.lo; v <= a.hi + a.step / 2; v += a.step) {
      svg += Line(x0, Y(v), x0 + pw, Y(v));
      svg += Text(x0 - 6, Y(v) + 4, fmt::format("{:g}", v), "end", 11);
    }
    const double group = double(pw) / double(rows.size()), bar = std::min(36.0, group / 3);
    for (size_t i = 0; i < rows.size(); ++i) {
      const CpuReadyGrowth& g = rows[i];
      const double gx = x0 + group * double(i) + group / 2;
      auto Column = [&](double left, double v, const char* color) {
        if (!std::isfinite(v)) {
          svg += Text(left + bar / 2, bottom - 4, "-", "middle", 10);
          return;
        }
        svg += Rect(left, Y(v), bar, bottom - Y(v), color);
        svg += Text(left + bar / 2, Y(v) - 4, fmt::format("{:.2f}", v), "middle", 10);
      };
      Column(gx - bar - 1, g.*panel.ours, ours_color);
      if (g.has_published) Column(gx + 1, g.*panel.theirs, theirs_color);
      svg += Text(gx, bottom + 16, fmt::format("RDY {:g}%", g.ready_pct), "middle", 11);
    }
    svg += Line(x0, bottom, x0 + pw, bottom, "#000", 1);
  }
  const double ly = bottom + 50;
  svg += Rect(L, ly - 10, 14, 12, ours_color);
  svg += Text(L + 20, ly, "vstack (medians of rounds, against its first row)");
  svg += Rect(L + 400, ly - 10, 14, 12, theirs_color);
  svg += Text(L + 420, ly, "published (RDY% 1.2 / 5.1 / 28.4, against the 1.2% control)");
  return svg + "</svg>\n";
}

}  // namespace vstack::bench
