// What the simulated workload writes, and how the model names it. The model's unit is one
// 512-byte sector; a unit's content is named by its 64-bit hash (UnitHash). A write fills each
// 4 KiB-aligned chunk of its range with one kind of data, so that the grain layers see what they
// are for: unique random bytes, zeros (zero grains), one of a few fixed patterns (the same
// grain again: deduplication hits) and text (compresses).
#ifndef VSTACK_ANALYSIS_SIM_CONTENT_H_
#define VSTACK_ANALYSIS_SIM_CONTENT_H_

#include <cstddef>
#include <cstdint>

#include "blockdev/sim/sim_rng.h"

namespace vstack::sim {

inline constexpr uint64_t kUnit = 512;

// The hash of one unit's 512 bytes.
uint64_t UnitHash(const uint8_t* unit);
// The hash of a unit of zeros.
uint64_t ZeroUnitHash();

// Fills `len` bytes (a multiple of kUnit) that go to device offset `offset` (a multiple of
// kUnit), chunk by 4 KiB-aligned chunk, with data drawn from `rng`.
void FillWrite(SimRng& rng, uint64_t offset, uint8_t* data, size_t len);

// Fills `len` bytes at `offset` with the deterministic content of a differencing disk's parent
// number `seed` (every unit non-zero, so a sector that shows zeros in its place is wrong).
void FillParent(uint64_t seed, uint64_t offset, uint8_t* data, size_t len);

}  // namespace vstack::sim

#endif  // VSTACK_ANALYSIS_SIM_CONTENT_H_
