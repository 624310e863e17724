#include "bench/workload/offsets.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace vstack::bench {
namespace {

// log1p(x)/x and expm1(x)/x, continuous at 0.
double Log1pOverX(double x) { return std::fabs(x) > 1e-8 ? std::log1p(x) / x : 1 - x / 2; }
double Expm1OverX(double x) { return std::fabs(x) > 1e-8 ? std::expm1(x) / x : 1 + x / 2; }

}  // namespace

ZipfSampler::ZipfSampler(uint64_t n, double theta) : n_(std::max<uint64_t>(n, 1)), theta_(theta) {
  h_x1_ = H(1.5) - 1.0;
  h_n_ = H(static_cast<double>(n_) + 0.5);
  s_ = 2.0 - HInverse(H(2.5) - h(2.0));
}

double ZipfSampler::h(double x) const { return std::exp(-theta_ * std::log(x)); }

// H(x) = (x^(1-theta) - 1) / (1 - theta), written so it stays accurate near theta = 1.
double ZipfSampler::H(double x) const {
  const double lx = std::log(x);
  return Expm1OverX((1.0 - theta_) * lx) * lx;
}

double ZipfSampler::HInverse(double y) const {
  double t = y * (1.0 - theta_);
  if (t < -1.0) t = -1.0;  // rounding at the lower end
  return std::exp(Log1pOverX(t) * y);
}

uint64_t ZipfSampler::Sample(WorkloadRng& rng) const {
  for (;;) {
    const double u = h_n_ + rng.Unit() * (h_x1_ - h_n_);
    const double x = HInverse(u);
    double kd = std::floor(x + 0.5);
    kd = std::clamp(kd, 1.0, static_cast<double>(n_));
    if (kd - x <= s_ || u >= H(kd + 0.5) - h(kd)) return static_cast<uint64_t>(kd);
  }
}

OffsetGenerator::OffsetGenerator(const WorkloadKnobs& k, uint64_t region, uint32_t thread,
                                 uint32_t threads)
    : blocks_(std::max<uint64_t>(region / k.block_size, 1)),
      block_size_(k.block_size),
      pattern_(k.pattern),
      distribution_(k.distribution),
      zipf_(blocks_, k.distribution == Distribution::kZipf ? k.zipf_theta : 2.0) {
  cursor_ = static_cast<uint64_t>(
      static_cast<unsigned __int128>(blocks_) * thread / std::max<uint32_t>(threads, 1));
  // Spread hot ranks over the device, as fio does, with a multiplicative permutation: rank r
  // (1..blocks) goes to block (r * stride) mod blocks, a bijection when gcd(stride, blocks) = 1.
  stride_ = static_cast<uint64_t>(static_cast<double>(blocks_) * 0.6180339887498949) | 1;
  while (blocks_ > 1 && std::gcd(stride_, blocks_) != 1) stride_ += 2;
  stride_ %= blocks_;
  if (stride_ == 0) stride_ = 1;
}

uint64_t OffsetGenerator::Next(WorkloadRng& rng) {
  uint64_t block;
  if (pattern_ == AccessPattern::kSequential) {
    block = cursor_;
    if (++cursor_ == blocks_) cursor_ = 0;
  } else if (distribution_ == Distribution::kUniform) {
    block = rng.Below(blocks_);
  } else {
    const uint64_t rank = zipf_.Sample(rng);  // 1 = hottest
    block = static_cast<uint64_t>(static_cast<unsigned __int128>(rank) * stride_ % blocks_);
  }
  return block * block_size_;
}

}  // namespace vstack::bench
