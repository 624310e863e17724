// Allocation extents, as reported by BlockDevice::MapExtents (and served as NBD
// base:allocation, or printed by `vstack map`).
#ifndef VSTACK_LIB_EXTENT_H_
#define VSTACK_LIB_EXTENT_H_

#include <cstdint>
#include <vector>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

enum ExtentFlag : uint32_t {
  kExtentHole = 1u << 0,  // not allocated in this layer (never written, or discarded)
  kExtentZero = 1u << 1,  // reads as zeros
};

struct Extent {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t flags = 0;  // ExtentFlag bits; 0 = allocated data

  bool operator==(const Extent&) const = default;
};

// Appends [offset, offset+length) with `flags` to `out`, merging with the last extent when it
// is adjacent and has the same flags.
void AppendExtent(std::vector<Extent>* out, uint64_t offset, uint64_t length, uint32_t flags);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_EXTENT_H_
