// What a block device looks like from above: its size, block sizes, alignment and transfer
// limits (Geometry) and which operations and flags it supports (Capabilities). Both are fixed
// when the device is opened and may be read from any thread.
#ifndef VSTACK_LIB_GEOMETRY_H_
#define VSTACK_LIB_GEOMETRY_H_

#include <cstdint>
#include <string>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

struct Geometry {
  // Virtual size in bytes; a multiple of logical_block.
  uint64_t size_bytes = 0;
  // Offsets and lengths of every request must be multiples of this (512 or 4096).
  uint32_t logical_block = 512;
  // Writes smaller than this cost a read-modify-write somewhere below. Informational.
  uint32_t physical_block = 512;
  // Every iovec base address and length must be a multiple of this (1 = any; 4096 for
  // O_DIRECT). A power of two.
  uint32_t mem_alignment = 1;
  // Largest request the device accepts in one piece; 0 = unlimited. The base class splits
  // larger read/write/write-zeroes requests, so callers may ignore it.
  uint64_t max_transfer = 0;
  // Preferred request size and alignment (a VHD block, a dedup grain); 0 = no preference.
  uint32_t optimal_transfer = 0;
};

// Operations and behaviours a device supports. The base class emulates what is missing where
// that is safe: FUA as write + flush, write-zeroes as writes of zeros. See docs/design.md.
enum Capability : uint32_t {
  kCapRead = 1u << 0,
  kCapWrite = 1u << 1,
  kCapFlush = 1u << 2,
  kCapDiscard = 1u << 3,
  kCapWriteZeroes = 1u << 4,
  kCapFua = 1u << 5,            // native FUA; without it the base emulates with a flush
  kCapDiscardZeroes = 1u << 6,  // discarded ranges read back as zeros
  kCapFastZeroes = 1u << 7,     // write-zeroes is cheaper than writing zeros (no data I/O)
  kCapExtents = 1u << 8,        // MapExtents reports real allocation, not just "all data"
  kCapPersistent = 1u << 9,     // data survives Close() and reopen
  kCapThreadSafe = 1u << 10,    // several queues may be used from several threads at once
  kCapResizable = 1u << 11,     // the size can change (a regular file): Resize works unless
                                // the device is read-only; layers do not inherit it unless
                                // they implement Resize themselves
};
using Capabilities = uint32_t;

// "read,write,flush,..." for display.
std::string CapabilitiesToString(Capabilities caps);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_GEOMETRY_H_
