// Where each request of one thread goes: sequential from the thread's own start (wrapping at
// the end of the region), uniform random, or zipf-skewed random. Offsets are multiples of the
// block size inside [0, region).
#ifndef VSTACK_BENCH_WORKLOAD_OFFSETS_H_
#define VSTACK_BENCH_WORKLOAD_OFFSETS_H_

#include <cstdint>

#include "bench/workload/knobs.h"
#include "bench/workload/rng.h"

namespace vstack::bench {

// Zipf-distributed ranks in [1, n]: P(k) proportional to 1 / k^theta, for theta > 0, theta != 1.
// Rejection-inversion sampling (Hormann and Derflinger, 1996): O(1) per draw, no tables, so
// memory does not grow with n.
class ZipfSampler {
 public:
  // REQUIRES: n >= 1, theta > 0, theta != 1.
  ZipfSampler(uint64_t n, double theta);
  uint64_t Sample(WorkloadRng& rng) const;

 private:
  double H(double x) const;         // integral of h, shifted so it is well-conditioned
  double HInverse(double y) const;
  double h(double x) const;         // the density 1 / x^theta

  uint64_t n_;
  double theta_;
  double h_x1_;   // H(1.5) - 1
  double h_n_;    // H(n + 0.5)
  double s_;      // the squeeze that accepts most draws without evaluating H
};

class OffsetGenerator {
 public:
  // Thread `thread` of `threads`. Sequential threads start at region * thread / threads.
  OffsetGenerator(const WorkloadKnobs& k, uint64_t region, uint32_t thread, uint32_t threads);
  uint64_t Next(WorkloadRng& rng);

 private:
  uint64_t blocks_;
  uint32_t block_size_;
  AccessPattern pattern_;
  Distribution distribution_;
  uint64_t cursor_ = 0;      // sequential: next block
  uint64_t stride_ = 1;      // zipf: rank -> block permutation (coprime with blocks_)
  ZipfSampler zipf_;
};

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_OFFSETS_H_
