// Compacting a dynamic VHD (`vstack compact`): blocks that read as zeros are given back, blocks
// from the end of the file move into the holes, and the file is truncated behind the last one.
//
// Every step keeps the image valid if interrupted: a block is freed by clearing its BAT entry
// (its bytes become leaked space), a block moves by copying it into free space, flushing, and
// only then pointing its BAT entry at the copy, and the file shrinks only after the footer has
// been written at the new end and flushed.
#ifndef VSTACK_FORMATS_VHD_VHD_COMPACT_H_
#define VSTACK_FORMATS_VHD_VHD_COMPACT_H_

#include "lib/block_device.h"
#include "lib/compact.h"

namespace vstack::vhd {

// Compacts the dynamic VHD held by `file` (the device below a vhd layer, with no vhd layer
// open on it), reporting the stages and figures of lib/compact.h (space_released and
// log_entries stay 0). Refuses images with corruption (run `vstack check -r all` first) and
// fixed images. Registered as the "vhd" compaction (RegisterCompactor).
Result<CompactReport> CompactImage(BlockDevice& file, const CompactProgress& progress);

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_COMPACT_H_
