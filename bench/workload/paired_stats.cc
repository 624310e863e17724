#include "bench/workload/paired_stats.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace vstack::bench {
namespace {

std::string Format(const char* fmt, double a, double b, double c) {
  char buf[96];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

}  // namespace

double RatioInterval::relative_half_width() const {
  if (!has_interval() || estimate <= 0) return std::numeric_limits<double>::infinity();
  return (high - low) / 2 / estimate;
}

double StudentT975(int df) {
  static const double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                  2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                  2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                  2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) return std::numeric_limits<double>::infinity();
  if (df <= 30) return kTable[df - 1];
  const double z = 1.959964, n = df;
  return z + (z * z * z + z) / (4 * n) + (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * n * n);
}

RatioInterval PairedRatio(const std::vector<double>& ratios) {
  std::vector<double> logs;
  for (double r : ratios) {
    if (std::isfinite(r) && r > 0) logs.push_back(std::log(r));
  }
  RatioInterval out;
  out.n = static_cast<int>(logs.size());
  if (out.n == 0) return out;
  double mean = 0;
  for (double v : logs) mean += v;
  mean /= out.n;
  out.estimate = out.low = out.high = std::exp(mean);
  if (out.n < 2) return out;
  double ss = 0;
  for (double v : logs) ss += (v - mean) * (v - mean);
  const double se = std::sqrt(ss / (out.n - 1) / out.n);
  const double half = StudentT975(out.n - 1) * se;
  out.low = std::exp(mean - half);
  out.high = std::exp(mean + half);
  out.significant = out.low > 1 || out.high < 1;
  return out;
}

std::vector<double> RoundRatios(const std::vector<double>& x, const std::vector<double>& base) {
  std::vector<double> out;
  for (size_t r = 0; r < x.size() && r < base.size(); ++r) {
    if (x[r] > 0 && base[r] > 0) out.push_back(x[r] / base[r]);
  }
  return out;
}

std::string DescribeRatio(const RatioInterval& r) {
  if (r.n == 0) return "n/a";
  if (!r.has_interval()) return Format("%.3fx (1 round, no interval)", r.estimate, 0, 0);
  return Format("%.3fx (%.3f-%.3f)", r.estimate, r.low, r.high) +
         (r.significant ? "" : ", not significant");
}

}  // namespace vstack::bench
