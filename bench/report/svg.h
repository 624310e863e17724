// The SVG primitives the bench charts share (bench/report/charts.cc, cpu_chart.cc): a header with
// a title, text, lines, bars, whiskers, a palette, round axis ticks and stack labels. Each returns
// the SVG text of its element; the charts concatenate them.
#ifndef VSTACK_BENCH_REPORT_SVG_H_
#define VSTACK_BENCH_REPORT_SVG_H_

#include <cstddef>
#include <string>
#include <vector>

#include "bench/report/report.h"

namespace vstack::bench {

// The i-th colour of a ten-colour palette (repeating).
const char* Color(size_t i);
// The <svg> element opening a chart of w x h pixels on white, with its title on top.
std::string Header(int w, int h, const std::string& title);
std::string Text(double x, double y, const std::string& s, const char* anchor = "start",
                 int size = 12, const char* extra = "");
std::string Line(double x1, double y1, double x2, double y2, const char* color = "#ccc",
                 double width = 1, const char* dash = "");
std::string Rect(double x, double y, double w, double h, const char* color);
// A bar from x0 to x1; one that is not `conclusive` (an interval including "no change", a value
// below the resolution) is drawn pale with a dashed outline.
std::string Bar(double x0, double x1, double y, double h, const char* color, bool conclusive);
// A whisker from x0 to x1 at height y, with end caps.
std::string Whisker(double x0, double x1, double y);
// "250 us", "1.5 ms".
std::string UsLabel(double us);
// The stacks of the report that produced a measurement, in order.
std::vector<const bench::StackSummary*> Measured(const BenchReport& r);
// A whole chart saying that no stack produced a measurement.
std::string NoData(int w, int h, const std::string& title);

// A linear axis over [lo, hi] with about five round ticks (1, 2, 2.5 or 5 times a power of 10).
struct Axis {
  double lo = 0, hi = 1, step = 0.2;
};
Axis NiceAxis(double lo, double hi);

// A stack's name shortened for a label (long specs end in "...").
std::string Label(const std::string& name);
// Width in pixels of the widest label of `stacks` at 12px, with a margin.
int LabelWidth(const std::vector<const bench::StackSummary*>& stacks);

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_REPORT_SVG_H_
