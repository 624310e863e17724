// SVG charts of a bench report, written by hand (no plotting library): a latency CDF per stack
// with a tail-stretched percentile axis, IOPS and efficiency overhead against the baseline, and
// the time and the CPU each layer adds per guest I/O, and a CPU Ready sweep beside the published one.
// Render them to PNG with rsvg-convert to look at them.
#ifndef VSTACK_BENCH_REPORT_CHARTS_H_
#define VSTACK_BENCH_REPORT_CHARTS_H_

#include <string>

#include "bench/report/report.h"

namespace vstack::bench {

std::string LatencyCdfSvg(const BenchReport& r);
std::string OverheadSvg(const BenchReport& r);
std::string LayerCostSvg(const BenchReport& r);
// CPU per guest I/O of every stack, stacked by layer, the share outside every layer in grey, and
// the measured CPU marked (bench/report/cpu_chart.cc).
std::string CpuCostSvg(const BenchReport& r);
// A --cpu-ready sweep's growth against its control beside the published table's (yields, wait,
// duration); a "no data" chart without a sweep.
std::string CpuReadySvg(const BenchReport& r);

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_REPORT_CHARTS_H_
