// Durations and their distributions, as written in stack specs: "5ms", "254.4us",
// "uniform:1ms:3ms" (min:max), "lognormal:5ms:2ms" (mean:standard deviation), "exp:4ms"
// (exponential with that mean), "pct:0=1ms/50=6.5ms/99=77ms/100=175ms" (a percentile table,
// as fio and diskspd print one: the value at each percentile, log-linear in between). A
// ServiceTime draws from one of them with a caller's Rng, so
// a layer's draws are deterministic for a given seed.
#ifndef VSTACK_BLOCKDEV_EMULATION_SERVICE_TIME_H_
#define VSTACK_BLOCKDEV_EMULATION_SERVICE_TIME_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/errors.h"
#include "lib/splitmix64.h"

namespace vstack {

// The draws of the emulation layers' service times (lib/splitmix64.h).
class TimingRng : public SplitMixRng {
 public:
  explicit TimingRng(uint64_t seed) : SplitMixRng(seed) {}
  // Uniform in (0, 1): never 0, so logarithms are safe.
  double Unit() { return (double(Next() >> 11) + 0.5) * 0x1.0p-53; }
};

// "5ms", "80us", "1.5s", "250ns", "0" -> nanoseconds. A bare number is nanoseconds only if it
// is 0; otherwise the unit is required (no guessing between ms and µs).
Result<uint64_t> ParseDurationNs(const std::string& text);
// 5400000 -> "5.4ms", 80000 -> "80us".
std::string FormatDurationNs(double ns);

class ServiceTime {
 public:
  enum class Kind { kFixed, kUniform, kLogNormal, kExponential, kPercentiles };

  ServiceTime() = default;
  static ServiceTime Fixed(uint64_t ns);
  // Errors name `what` (e.g. "delay: read") and give the accepted forms.
  static Result<ServiceTime> Parse(const std::string& what, const std::string& text);

  uint64_t Draw(TimingRng& rng) const;
  double mean_ns() const;
  Kind kind() const { return kind_; }
  std::string ToString() const;

 private:
  Kind kind_ = Kind::kFixed;
  double a_ = 0, b_ = 0;  // fixed: a; uniform: [a, b]; log-normal: mean a, sd b; exp: mean a
  double mu_ = 0, sigma_ = 0;  // log-normal parameters of the underlying normal
  // Percentile table: (percentile 0..100, ns) points from 0 to 100, both increasing; between
  // two points the value grows log-linearly with the percentile.
  std::vector<std::pair<double, double>> table_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_EMULATION_SERVICE_TIME_H_
