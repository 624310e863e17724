// Compacting a dynamic VHD (`vstack compact`): blocks that read as zeros are given back, blocks
// from the end of the file move into the holes, and the file is truncated behind the last one.
//
// Every step keeps the image valid if interrupted: a block is freed by clearing its BAT entry
// (its bytes become leaked space), a block moves by copying it into free space, flushing, and
// only then pointing its BAT entry at the copy, and the file shrinks only after the footer has
// been written at the new end and flushed.
#ifndef VSTACK_FORMATS_VHD_VHD_COMPACT_H_
#define VSTACK_FORMATS_VHD_VHD_COMPACT_H_

#include <cstdint>
#include <functional>

#include "lib/block_device.h"

namespace vstack::vhd {

struct CompactReport {
  uint64_t blocks_before = 0;
  uint64_t zero_blocks_freed = 0;
  uint64_t blocks_moved = 0;
  uint64_t file_size_before = 0;
  uint64_t file_size_after = 0;
};

// The two stages of a compaction, in order: every allocated block is read to find the all-zero
// ones, then blocks at the end of the file are moved into holes.
enum class CompactStage { kScan, kMove };
// `progress(stage, done, total)`: `done` of the stage's `total` blocks (fixed for the stage)
// are scanned or moved; the last call of a stage has done == total.
using CompactProgress = std::function<void(CompactStage stage, uint64_t done, uint64_t total)>;

// Compacts the dynamic VHD held by `file` (the device below a vhd layer, with no vhd layer
// open on it). Refuses images with corruption (run `vstack check -r all` first) and fixed
// images.
Result<CompactReport> CompactImage(BlockDevice& file, const CompactProgress& progress);

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_COMPACT_H_
