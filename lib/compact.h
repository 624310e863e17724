// Compacting an image file: the report, stages and progress callback that every format's
// compaction shares (`vstack compact`, CompactImage in <vstack/imagetools/compact.h>), and the
// table through which a format offers one. A format registers its compaction once, next to its
// implementation:
//
//   static const bool registered = RegisterCompactor("vhd", &vhd::CompactImage);
//
// and CompactImage (imagetools) finds it by the format's name, without knowing the format.
#ifndef VSTACK_LIB_COMPACT_H_
#define VSTACK_LIB_COMPACT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lib/block_device.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// What a compaction did, counted in the format's blocks. A figure a format has no notion of
// stays 0.
struct CompactReport {
  uint64_t blocks_before = 0;      // allocated (present) blocks before
  uint64_t zero_blocks_freed = 0;  // allocated blocks that read as zeros, given back
  uint64_t space_released = 0;     // blocks already reading as zeros whose space was given back
                                   // (VHDX: ZERO and UNMAPPED blocks)
  uint64_t blocks_moved = 0;       // blocks moved from the end of the file into holes
  uint64_t log_entries = 0;        // metadata log entries written (VHDX)
  uint64_t file_size_before = 0;   // bytes
  uint64_t file_size_after = 0;
};

// The two stages of a compaction, in order: every allocated block is read to find the all-zero
// ones, then blocks at the end of the file are moved into holes.
enum class CompactStage { kScan, kMove };

// `progress(stage, done, total)`: `done` of the stage's `total` blocks (fixed for the stage) are
// scanned or moved; called on the compacting thread, and the last call of a stage has
// done == total. A stage with nothing to do may make no call.
using CompactProgress = std::function<void(CompactStage stage, uint64_t done, uint64_t total)>;

// A format's compaction of the image held by `file` (the device below the format's layer, with
// no layer of the format open on it). `progress` is always callable. Leaves the image valid if
// interrupted at any point (each format documents how) and `file` open.
using CompactFunction =
    std::function<Result<CompactReport>(BlockDevice& file, const CompactProgress& progress)>;

// Makes `compact` the compaction of the registered format `format` (its ComponentInfo name,
// whose `probe` recognises its images). Returns true so that it can initialise a static; a
// second registration for the same format replaces the first.
bool RegisterCompactor(const std::string& format, CompactFunction compact);
// The compaction registered for `format`, or nullptr.
const CompactFunction* FindCompactor(const std::string& format);
// The formats with a compaction, sorted by name.
std::vector<std::string> CompactableFormats();

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_COMPACT_H_
