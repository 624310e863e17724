// Confidence intervals for the estimates of `vstack space --estimate` (docs/space-savings.md,
// "Estimates"): normal-approximation (score) intervals for a count seen through Bernoulli
// sampling, for a proportion, and for a mean of a Bernoulli sample (plain, and with a rare
// largest value).
#ifndef VSTACK_ANALYSIS_SPACE_INTERVAL_H_
#define VSTACK_ANALYSIS_SPACE_INTERVAL_H_

#include <cstdint>

namespace vstack {

struct Interval {
  double value = 0, low = 0, high = 0;
};

// z such that a standard normal lies in [-z, z] with probability `confidence` (0 < c < 1).
double NormalQuantile(double confidence);

// The number D of distinct items when each was kept independently with probability `p` and
// `kept` were seen: kept ~ Binomial(D, p). Score interval: the D with
// (kept - D p)^2 <= z^2 D p (1 - p). Exact (zero width) when p is 1.
Interval CountInterval(uint64_t kept, double p, double z);

// The proportion of `hits` in `n` draws (Wilson score interval).
Interval ProportionInterval(uint64_t hits, uint64_t n, double z);

// Sums of a sample of values: the mean and its interval.
struct SampleSums {
  uint64_t n = 0;
  double sum = 0, sum_sq = 0;
  void Add(double v) {
    ++n;
    sum += v;
    sum_sq += v * v;
  }
  SampleSums& operator+=(const SampleSums& o) {
    n += o.n;
    sum += o.sum;
    sum_sq += o.sum_sq;
    return *this;
  }
};
// The population mean from a Bernoulli sample taken with probability `p` (finite population
// correction 1 - p), with the sample variance; exact when p is 1.
Interval MeanInterval(const SampleSums& s, double p, double z);

// The same mean where `whole` of the sampled values equal `top`, the largest a value can be (a
// grain stored raw), and the others have the sums `rest`. Where `top` values are rare, a sample
// that holds few or none of them underestimates the mean and its spread together, and
// MeanInterval then misses the truth far more often than it says (a 95% interval held it in
// 77% of samples with one raw grain in 200 expected: tests/analysis/space_estimate_test.cc).
// This is a score interval on the share q of `top` values, as Wilson's for a proportion: the
// mean is m + q (top - m), m the others' mean, and its spread is taken at each q tried,
// q (1 - q) (top - m)^2 + (1 - q) s^2 (s^2 the others' variance), not at the q seen. Exact when
// p is 1.
Interval MixtureMeanInterval(uint64_t whole, double top, const SampleSums& rest, double p,
                             double z);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_INTERVAL_H_
