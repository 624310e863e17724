// What `vstack info` shows about a stack (qemu-img info), as a library call: its geometry, its
// capabilities and its layers, top first, each with its own facts (BlockDevice::Properties), as
// the JSON document `vstack info --output=json` prints. Python's vstack.info() and
// Device.stats() return the same document (docs/python.md).
#ifndef VSTACK_IMAGETOOLS_INFO_H_
#define VSTACK_IMAGETOOLS_INFO_H_

#include <string>

#include "lib/block_device.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

struct InfoOptions {
  // Each layer also carries "stats": its statistics since the stack was opened (per operation:
  // requests, bytes, errors and latency; requests in flight; the layer's own counters), as
  // `vstack serve` reports them when it stops. The latency is null for a layer that does not
  // keep it (StatsMode::kCounts, the default: lib/stats.h), rather than zeros.
  bool stats = false;
};

// The document for the stack `top`, opened from `spec`, as JSON text (2-space indents):
//   {"spec", "geometry": {size_bytes, logical_block, physical_block, mem_alignment,
//    max_transfer, optimal_transfer}, "capabilities": [names], "layers": [{"kind",
//    "description", "geometry", "capabilities", "properties": {key: value}[, "stats"]}]}
// Thread-safe, as the queries it makes are.
std::string InfoJson(const std::string& spec, BlockDevice& top, const InfoOptions& options = {});

// `vstack info --backing-chain --output=json`: a JSON array of InfoJson documents, one per image
// of BackingChain(spec, top) (imagetools/map.h), top first.
std::string BackingChainInfoJson(const std::string& spec, BlockDevice& top);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_IMAGETOOLS_INFO_H_
