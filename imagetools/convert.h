// Copying one virtual disk into another: what `vstack convert` does (qemu-img convert), as
// library calls.
//
//   CopyImage(src, dst)       copies between two open devices
//   ConvertImage(src, "out.vhd", {.format = "vhd"})
//                             into a new image file (NewImageFile), or into an existing stack
//                             given by its spec
//
// Ranges the source reports as zero (MapExtents) are not read. Ranges that read as zeros are
// not written into a destination that reads as zeros already (a new image: they stay holes,
// unallocated blocks of a dynamic VHD or holes of a raw file), at 4 KiB granularity; into any
// other destination they become write-zeroes. `depth` chunks of 2-8 MiB (the larger of the two
// devices' optimal transfer sizes, clamped) are in flight at a time, each through the devices'
// own queues.
#ifndef VSTACK_IMAGETOOLS_CONVERT_H_
#define VSTACK_IMAGETOOLS_CONVERT_H_

#include <cstdint>
#include <functional>
#include <atomic>
#include <string>
#include <string_view>

#include "lib/block_device.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// Reports how far a copy has come: `done` bytes of the source's `total`, counted in chunk order
// of completion; called on the copying thread, after every chunk, and finally with done == total
// when the copy succeeds.
using CopyProgress = std::function<void(uint64_t done, uint64_t total)>;

struct CopyOptions {
  // True if the destination reads as zeros where nothing is written (a new image): zero ranges
  // are then skipped. False: they are written with write-zeroes.
  bool dst_reads_zero = false;
  int depth = 8;  // chunks in flight, >= 1
  CopyProgress progress{};
  // When it becomes true (a signal handler, or the progress callback, sets it), no new chunk
  // starts and the copy ends with Errc::kCancelled once the chunks in flight are done, even
  // when they were the last ones: a copy asked to stop never reports success. May be null.
  const std::atomic<bool>* stop = nullptr;
};

struct CopyStats {
  uint64_t copied = 0;   // bytes of the source covered: its whole size after a success
  uint64_t written = 0;  // bytes written with data (zero ranges excluded)
};

// Copies src[0, src size) to the same offsets of `dst` (and zeros after them to the end of
// `dst`'s last sector, when its sectors are larger than the source's size allows), then
// flushes `dst`. Errors: `dst` is
// smaller than `src` (Errc::kOutOfRange), or the write, flush or read that fails at the lowest
// offset, naming it (a chunk whose read fails is read again in smaller pieces, to name the
// lowest offset in it that fails, with that piece's error). REQUIRES: no queue of either device
// is in use by another thread while copying.
Result<CopyStats> CopyImage(BlockDevice& src, BlockDevice& dst, const CopyOptions& options = {});

struct ConvertOptions {
  // A new file: its format ("raw", "vhd", "vhdx"), create options ("subformat=fixed"), and
  // whether an existing file may be replaced (NewImageFile). Must stay empty/false for a stack
  // spec destination, which is written as it is.
  std::string format{};  // empty: raw
  std::string create_options{};
  bool overwrite = false;
  CopyProgress progress{};
  // As CopyOptions::stop: a new file is then removed, an existing one it replaces left as it
  // was, even when the stop comes after the last chunk.
  const std::atomic<bool>* stop = nullptr;
};

// Copies the virtual disk of `src` into `dst`: a new image file of the source's size made with
// NewImageFile (holes stay holes), or, when `dst` is a stack spec (IsStackSpec), the existing
// stack it opens, which must be at least as large as `src`. A new file is put in place only
// after the copy succeeded and is removed otherwise. Errors: NewImageFile's (a bad format or
// option: Errc::kInvalidArgument or kNotFound), CopyImage's, the destination's open and close.
Result<CopyStats> ConvertImage(BlockDevice& src, const std::string& dst,
                               const ConvertOptions& options = {});

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_IMAGETOOLS_CONVERT_H_
