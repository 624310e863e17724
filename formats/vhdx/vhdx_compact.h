// Compacting a dynamic VHDX (`vstack compact`): payload blocks that read as zeros are given
// back (their entries become NOT_PRESENT), space kept by ZERO and UNMAPPED blocks is released,
// blocks from the end of the file move into the holes left behind (and into space leaked by a
// crash), and the file is truncated behind the last block.
//
// Every BAT change goes through the image's log (docs/layers/vhdx.md, "Compact"), so a crash at
// any point leaves an image that opens (replaying the log) with the same contents: freed blocks'
// pages are logged and written in place; moved blocks are copied into free space and flushed
// before the log entry that points their entries at the copies; the file shrinks only after the
// BAT is durable and the log is clean. Time is linear in the BAT's size plus the data read and
// moved; memory is the BAT and one 1 MiB buffer.
#ifndef VSTACK_FORMATS_VHDX_VHDX_COMPACT_H_
#define VSTACK_FORMATS_VHDX_VHDX_COMPACT_H_

#include <cstdint>
#include <functional>

#include "lib/block_device.h"

namespace vstack::vhdx {

struct CompactReport {
  uint64_t blocks_before = 0;      // FULLY_PRESENT payload blocks before
  uint64_t zero_blocks_freed = 0;  // present blocks that read as zeros, made NOT_PRESENT
  uint64_t space_released = 0;     // ZERO/UNMAPPED blocks whose reserved space was released
  uint64_t blocks_moved = 0;
  uint64_t log_entries = 0;
  uint64_t file_size_before = 0;
  uint64_t file_size_after = 0;
};

// The two stages, in order: every present block is read to find the all-zero ones, then
// blocks at the end of the file are moved into holes.
enum class CompactStage { kScan, kMove };
// `progress(stage, done, total)`: `done` of the stage's `total` blocks are scanned or moved;
// the last call of a stage has done == total.
using CompactProgress = std::function<void(CompactStage stage, uint64_t done, uint64_t total)>;

// Compacts the dynamic VHDX held by `file` (the device below a vhdx layer, with no vhdx layer
// open on it). A dirty log is replayed first. Refuses fixed images and images with errors.
Result<CompactReport> CompactImage(BlockDevice& file, const CompactProgress& progress);

}  // namespace vstack::vhdx

#endif  // VSTACK_FORMATS_VHDX_VHDX_COMPACT_H_
