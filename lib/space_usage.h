// Space accounting in the terms every space-saving layer reports (dedup, zstd, crc32c), so that
// `vstack info` and `vstack space` can set the layers of a stack side by side. The terms follow
// vSAN's and VDO's reports: logical bytes written and live, zero grains, unique grains,
// compressed bytes, stored bytes, physical bytes used and metadata bytes
// (docs/space-savings.md explains how they chain into savings ratios).
#ifndef VSTACK_LIB_SPACE_USAGE_H_
#define VSTACK_LIB_SPACE_USAGE_H_

#include <cstdint>

#include "lib/export.h"
#include "lib/property.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

struct SpaceUsage {
  uint32_t grain_bytes = 0;            // the layer's unit of mapping, checksumming or compressing
  uint64_t logical_bytes_written = 0;  // bytes of write and write-zeroes requests since open
  uint64_t logical_bytes_live = 0;     // grains holding written data (zeros included), in bytes
  uint64_t zero_grains = 0;            // live grains that are all zeros and are stored as nothing
  uint64_t unique_grains = 0;          // grains stored once each (after zero elimination, dedup)
  uint64_t compressed_bytes = 0;       // their exact size after compression (grain if stored raw)
  uint64_t stored_bytes = 0;           // their size under the layer's stored-size rule
  uint64_t physical_bytes_used = 0;    // bytes of the device below holding data, including
                                       // packing waste and space that awaits reuse
  uint64_t metadata_bytes = 0;         // bytes of the device below reserved for metadata
  uint64_t data_offset = 0;            // where the layer's grain data starts on the device below
                                       // (its metadata lies before); not a space figure
};

// Appends the figures of `u` to `out` with stable keys (space_logical_bytes_written, ...), so
// every layer shows them in `vstack info` under the same names.
void AppendSpaceProperties(const SpaceUsage& u, PropertyList& out);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_SPACE_USAGE_H_
