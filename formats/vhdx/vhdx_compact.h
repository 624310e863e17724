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

#include "lib/block_device.h"
#include "lib/compact.h"

namespace vstack::vhdx {

// Compacts the dynamic VHDX held by `file` (the device below a vhdx layer, with no vhdx layer
// open on it), reporting the stages and figures of lib/compact.h: blocks_before counts
// FULLY_PRESENT payload blocks, zero_blocks_freed those made NOT_PRESENT. A dirty log is replayed
// first. Refuses fixed images and images with errors. Registered as the "vhdx" compaction
// (RegisterCompactor).
Result<CompactReport> CompactImage(BlockDevice& file, const CompactProgress& progress);

}  // namespace vstack::vhdx

#endif  // VSTACK_FORMATS_VHDX_VHDX_COMPACT_H_
