// The SVG primitives the bench charts share (bench/report/svg.h).
#include "bench/report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench/report/charts.h"
#include "lib/xml_escape.h"

namespace vstack::bench {
namespace {

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
const char* const kFont = "font-family=\"DejaVu Sans, Arial, sans-serif\"";

}  // namespace

const char* Color(size_t i) { return kPalette[i % (sizeof kPalette / sizeof kPalette[0])]; }

std::string Header(int w, int h, const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\" "
      "{3}>{4}</text>\n",
      w, h, w / 2, kFont, XmlEscape(title));
}

std::string Text(double x, double y, const std::string& s, const char* anchor,
                 int size, const char* extra) {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\" font-size=\"{}\" {} {}>{}</text>\n",
                     x, y, anchor, size, kFont, extra, XmlEscape(s));
}

std::string Line(double x1, double y1, double x2, double y2, const char* color,
                 double width, const char* dash) {
  return fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
                     "stroke-width=\"{}\"{}/>\n",
                     x1, y1, x2, y2, color, width,
                     *dash ? fmt::format(" stroke-dasharray=\"{}\"", dash) : "");
}

std::string Rect(double x, double y, double w, double h, const char* color) {
  return fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n",
                     x, y, std::max(0.0, w), h, color);
}

std::string UsLabel(double us) {
  if (us >= 1000) return fmt::format("{:g} ms", us / 1000);
  return fmt::format("{:g} us", us);
}

std::vector<const bench::StackSummary*> Measured(const BenchReport& r) {
  std::vector<const bench::StackSummary*> v;
  for (const bench::StackSummary& s : r.summary.stacks) {
    if (s.runs > 0) v.push_back(&s);
  }
  return v;
}

std::string NoData(int w, int h, const std::string& title) {
  return Header(w, h, title) + Text(w / 2.0, h / 2.0, "no stack produced a measurement", "middle") +
         "</svg>\n";
}

Axis NiceAxis(double lo, double hi) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / 5;
  const double p = std::pow(10, std::floor(std::log10(raw)));
  double step = 10 * p;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= raw) {
      step = m * p;
      break;
    }
  }
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step, step};
}

// Stack names can be long specs: shorten for labels.
std::string Label(const std::string& name) {
  return name.size() <= 44 ? name : name.substr(0, 41) + "...";
}
// Width in pixels of the widest label at 12px (about 7px per character).
int LabelWidth(const std::vector<const bench::StackSummary*>& stacks) {
  size_t n = 8;
  for (const auto* s : stacks) n = std::max(n, Label(s->name).size());
  return static_cast<int>(n) * 15 / 2 + 24;
}

// A bar from x0 to x1; a bar whose interval includes "no change" is drawn pale with a dashed
// outline (visibly inconclusive).
std::string Bar(double x0, double x1, double y, double h, const char* color, bool conclusive) {
  const double x = std::min(x0, x1), w = std::fabs(x1 - x0);
  if (conclusive) return Rect(x, y, w, h, color);
  return fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
      "fill-opacity=\"0.25\" stroke=\"{}\" stroke-width=\"1.5\" stroke-dasharray=\"4,3\"/>\n",
      x, y, w, h, color, color);
}

// A whisker from x0 to x1 at height y, with end caps.
std::string Whisker(double x0, double x1, double y) {
  return Line(x0, y, x1, y, "#000", 1.5) + Line(x0, y - 5, x0, y + 5, "#000", 1.5) +
         Line(x1, y - 5, x1, y + 5, "#000", 1.5);
}

}  // namespace vstack::bench
