// The workload's random numbers: xorshift64* seeded through splitmix64, so every thread of every
// run draws a reproducible, independent stream from (seed, stream). A few ns per draw.
#ifndef VSTACK_BENCH_WORKLOAD_RNG_H_
#define VSTACK_BENCH_WORKLOAD_RNG_H_

#include <cstdint>

#include "lib/splitmix64.h"

namespace vstack::bench {

// splitmix64 (lib/splitmix64.h): a bijective mixer; also used to make tags look random.
inline uint64_t Mix64(uint64_t x) { return SplitMix64(x); }

class WorkloadRng {
 public:
  // Stream `stream` of `seed`: different streams never share a state sequence start.
  WorkloadRng(uint64_t seed, uint64_t stream) : s_(Mix64(seed ^ Mix64(stream)) | 1) {}

  uint64_t Next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  // Uniform in [0, n) without a division (Lemire's multiply-high). n = 0 gives 0.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_RNG_H_
