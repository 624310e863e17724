// SimRng: the random source of a deterministic simulation (analysis/sim and the simulated disk
// it drives): splitmix64, so one seed gives one sequence on every machine and compiler.
#ifndef VSTACK_BLOCKDEV_SIM_SIM_RNG_H_
#define VSTACK_BLOCKDEV_SIM_SIM_RNG_H_

#include <cstdint>

#include "lib/splitmix64.h"

namespace vstack::sim {

class SimRng : public SplitMixRng {
 public:
  explicit SimRng(uint64_t seed) : SplitMixRng(seed) {}
  // Uniform in [0, n); 0 when n is 0.
  uint64_t Below(uint64_t n) { return n ? Next() % n : 0; }
  // Uniform in [lo, hi].
  uint64_t Between(uint64_t lo, uint64_t hi) { return lo + Below(hi - lo + 1); }
  // True with probability p. Always draws once, so that changing a rate changes only the
  // decisions that rate governs, not the sequence.
  bool Chance(double p) { return static_cast<double>(Next() >> 11) * 0x1.0p-53 < p; }
  // A generator for a sub-task, independent of what this one draws next.
  SimRng Fork() { return SimRng(Next() ^ 0xD1B54A32D192ED03ull); }
};

}  // namespace vstack::sim

#endif  // VSTACK_BLOCKDEV_SIM_SIM_RNG_H_
