// Confidence intervals for comparisons made in interleaved rounds. Round r of a stack ran right
// next to round r of the baseline, under the same machine conditions, so the two are paired:
// the per-round ratio x_r / b_r cancels the drift that both rounds shared. The interval is a
// Student t-interval on the logarithms of those ratios (a ratio is multiplicative, and its log
// is close to symmetric), transformed back: a 95% interval for the geometric mean ratio.
// docs/bench.md ("Statistics") explains the choice and its assumptions.
#ifndef VSTACK_BENCH_WORKLOAD_PAIRED_STATS_H_
#define VSTACK_BENCH_WORKLOAD_PAIRED_STATS_H_

#include <string>
#include <vector>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

// A ratio to the baseline with its 95% confidence interval.
struct RatioInterval {
  int n = 0;              // paired rounds used (ratios that were finite and > 0)
  double estimate = 0;    // geometric mean of the per-round ratios; 0 when n == 0
  double low = 0, high = 0;  // the 95% interval; equal to estimate when n < 2
  // The interval excludes 1 (no change). Never true with fewer than 2 pairs.
  bool significant = false;

  bool has_interval() const { return n >= 2; }
  // Half the interval's width relative to the estimate ((high - low) / 2 / estimate): the
  // precision reached. +inf without an interval.
  double relative_half_width() const;
};

// The 97.5% quantile of Student's t distribution with `df` degrees of freedom (df >= 1): the
// factor of a two-sided 95% interval. Exact to 3 decimals from a table up to 30, then a
// Cornish-Fisher expansion.
double StudentT975(int df);

// The interval of the per-round ratios `ratios` (x_r / b_r). Ratios that are not finite or not
// > 0 are left out (a round where either side measured nothing).
RatioInterval PairedRatio(const std::vector<double>& ratios);

// Per-round ratios of paired values: x[r] / base[r] for every r where both are > 0.
std::vector<double> RoundRatios(const std::vector<double>& x, const std::vector<double>& base);

// "0.982x (0.913-1.052), not significant", "1.250x (1.201-1.301)", "0.982x (1 round, no
// interval)": the form every report prints.
std::string DescribeRatio(const RatioInterval& r);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_PAIRED_STATS_H_
