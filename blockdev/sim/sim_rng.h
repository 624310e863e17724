// SimRng: the random source of a deterministic simulation (analysis/sim and the simulated disk
// it drives): splitmix64, so one seed gives one sequence on every machine and compiler.
#ifndef VSTACK_BLOCKDEV_SIM_SIM_RNG_H_
#define VSTACK_BLOCKDEV_SIM_SIM_RNG_H_

#include <cstdint>

namespace vstack::sim {

class SimRng {
 public:
  explicit SimRng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); 0 when n is 0.
  uint64_t Below(uint64_t n) { return n ? Next() % n : 0; }
  // Uniform in [lo, hi].
  uint64_t Between(uint64_t lo, uint64_t hi) { return lo + Below(hi - lo + 1); }
  // True with probability p. Always draws once, so that changing a rate changes only the
  // decisions that rate governs, not the sequence.
  bool Chance(double p) { return static_cast<double>(Next() >> 11) * 0x1.0p-53 < p; }
  // A generator for a sub-task, independent of what this one draws next.
  SimRng Fork() { return SimRng(Next() ^ 0xD1B54A32D192ED03ull); }

 private:
  uint64_t s_;
};

}  // namespace vstack::sim

#endif  // VSTACK_BLOCKDEV_SIM_SIM_RNG_H_
