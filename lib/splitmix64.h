// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA
// 2014): the one definition of vstack's small deterministic random source and 64-bit mixer.
// Not for cryptography. Every user that replays from a seed (the simulator, the emulation
// layers' draws, the workload's tags) depends on these exact constants: changing them changes
// every recorded seed's run.
#ifndef VSTACK_LIB_SPLITMIX64_H_
#define VSTACK_LIB_SPLITMIX64_H_

#include <cstdint>

namespace vstack {

// The golden-ratio increment of the generator's state.
inline constexpr uint64_t kSplitMixGamma = 0x9E3779B97F4A7C15ull;

// A bijective mixer: the generator's output for state `x` (x + gamma, then the finalizer).
constexpr uint64_t SplitMix64(uint64_t x) {
  x += kSplitMixGamma;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The generator: Next() advances the state by gamma and returns its mixed value.
class SplitMixRng {
 public:
  explicit SplitMixRng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    const uint64_t x = state_;
    state_ += kSplitMixGamma;
    return SplitMix64(x);
  }

 private:
  uint64_t state_;
};

}  // namespace vstack

#endif  // VSTACK_LIB_SPLITMIX64_H_
