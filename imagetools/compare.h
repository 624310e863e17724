// Comparing the content of two virtual disks: what `vstack compare` does (qemu-img compare), as
// a library call. Ranges both devices report as zero (MapExtents) are not read; content is
// compared in 512-byte sectors, 1 MiB at a time. Each device is read in whole logical blocks of
// its own, so disks of different sector sizes (512 and 4096) compare whatever their sizes.
#ifndef VSTACK_IMAGETOOLS_COMPARE_H_
#define VSTACK_IMAGETOOLS_COMPARE_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "lib/block_device.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

struct CompareOptions {
  // Different sizes alone make the images differ. Otherwise the extra part of the larger one
  // must read as zeros.
  bool strict = false;
  // Asked before every 1 MiB chunk, on the calling thread: false stops the comparison, which
  // then fails with Errc::kCancelled (the Python module's Ctrl-C). May be empty.
  std::function<bool()> keep_going;
};

struct Comparison {
  uint64_t size_a = 0, size_b = 0;
  bool identical = false;
  // The offset of the first 512-byte sector that differs (past the smaller size: that is not
  // zero), if content differs; nullopt when identical, or when strict mode stopped at the sizes.
  std::optional<uint64_t> first_difference;

  bool size_mismatch() const { return size_a != size_b; }
};

// Compares `a` and `b`. Errors: the first chunk read that fails, naming the lowest offset in it
// that fails (the chunk is read again in smaller pieces to find it) with that piece's error.
Result<Comparison> CompareImages(BlockDevice& a, BlockDevice& b,
                                 const CompareOptions& options = {});

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_IMAGETOOLS_COMPARE_H_
