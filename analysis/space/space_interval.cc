#include "analysis/space/space_interval.h"

#include <algorithm>
#include <cmath>

namespace vstack {

double NormalQuantile(double confidence) {
  // P(|Z| <= z) = erf(z / sqrt 2): bisection on a monotone function.
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (std::erf(mid / std::sqrt(2.0)) < confidence ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

Interval CountInterval(uint64_t kept, double p, double z) {
  const double k = static_cast<double>(kept);
  if (p >= 1) return {k, k, k};
  const double q = 1 - p;
  // p^2 D^2 - (2 k p + z^2 p q) D + k^2 = 0.
  const double b = 2 * k * p + z * z * p * q;
  const double disc = std::sqrt(std::max(0.0, b * b - 4 * p * p * k * k));
  return {k / p, std::max(k, (b - disc) / (2 * p * p)), (b + disc) / (2 * p * p)};
}

Interval ProportionInterval(uint64_t hits, uint64_t n, double z) {
  if (n == 0) return {0, 0, 1};
  const double nn = static_cast<double>(n), ph = static_cast<double>(hits) / nn;
  const double den = 1 + z * z / nn;
  const double mid = (ph + z * z / (2 * nn)) / den;
  const double half = z * std::sqrt(ph * (1 - ph) / nn + z * z / (4 * nn * nn)) / den;
  return {ph, std::max(0.0, mid - half), std::min(1.0, mid + half)};
}

Interval MeanInterval(const SampleSums& s, double p, double z) {
  if (s.n == 0) return {0, 0, 0};
  const double n = static_cast<double>(s.n), mean = s.sum / n;
  if (p >= 1 || s.n < 2) return {mean, mean, mean};
  const double var = std::max(0.0, (s.sum_sq - n * mean * mean) / (n - 1));
  const double half = z * std::sqrt(var * (1 - p) / n);
  return {mean, std::max(0.0, mean - half), mean + half};
}

}  // namespace vstack
