// Compacting a dynamic image file in place: what `vstack compact` does, as a library call.
// All-zero blocks are given back, blocks from the end of the file move into the holes, and the
// file is truncated behind the last one; each format keeps its image valid if interrupted at
// any point (docs/layers/vhd.md and vhdx.md, "Compact").
//
//   CompactImage("d.vhdx", [](CompactStage stage, uint64_t done, uint64_t total) { ... })
//
// The format is found by name (a spec) or by probing (a path) among the formats that register
// a compaction (RegisterCompactor, <vstack/compact.h>): vhd and vhdx.
#ifndef VSTACK_IMAGETOOLS_COMPACT_H_
#define VSTACK_IMAGETOOLS_COMPACT_H_

#include <string>

#include "lib/compact.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// Compacts the dynamic image `target`: an image file's path, or a spec "FORMAT+BACKEND..."
// (e.g. "vhdx+file:/var/tmp/d.vhdx") whose first part is a format with a compaction. The image
// must not be open anywhere else. `progress` (may be empty) sees each stage's blocks. The file
// is closed before returning. Errors: a spec of another shape, or a file of no such format
// (Errc::kInvalidArgument, naming the formats); the file's open and close; the format's own
// refusals (a fixed image: kNotSupported; an image with errors: kCorruption) and I/O errors.
Result<CompactReport> CompactImage(const std::string& target, const CompactProgress& progress = {});

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_IMAGETOOLS_COMPACT_H_
