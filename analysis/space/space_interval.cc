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

Interval MixtureMeanInterval(uint64_t whole, double top, const SampleSums& rest, double p,
                             double z) {
  const double k = static_cast<double>(whole), n = k + static_cast<double>(rest.n);
  if (n == 0) return {0, 0, 0};
  const double mean = (k * top + rest.sum) / n;
  if (p >= 1) return {mean, mean, mean};
  const double others = static_cast<double>(rest.n);
  const double m = rest.n ? rest.sum / others : 0;
  const double var = rest.n >= 2 ? std::max(0.0, (rest.sum_sq - others * m * m) / (others - 1)) : 0;
  const double d = top - m;
  if (d <= 0) {  // no value below the top: nothing is skewed
    SampleSums all = rest;
    all.n += whole;
    all.sum += k * top;
    all.sum_sq += k * top * top;
    return MeanInterval(all, p, z);
  }
  // The shares q with (q_seen - q)^2 d^2 <= a (q (1 - q) d^2 + (1 - q) var), a = z^2 (1 - p) / n:
  // the q between the roots of A q^2 + B q + C.
  const double a = z * z * (1 - p) / n, q = k / n, d2 = d * d;
  const double qa = d2 * (1 + a), qb = -2 * q * d2 - a * d2 + a * var, qc = q * q * d2 - a * var;
  const double root = std::sqrt(std::max(0.0, qb * qb - 4 * qa * qc));
  const double q_low = std::clamp((-qb - root) / (2 * qa), 0.0, q);
  const double q_high = std::clamp((-qb + root) / (2 * qa), q, 1.0);
  return {mean, m + q_low * d, m + q_high * d};
}

}  // namespace vstack
