// Merging a differencing disk into its parent: what `vstack commit` does (qemu-img commit), as a
// library call. Differencing VHDs only (docs/layers/vhd.md, "Differencing disks").
#ifndef VSTACK_IMAGETOOLS_COMMIT_H_
#define VSTACK_IMAGETOOLS_COMMIT_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "imagetools/convert.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

struct CommitOptions {
  // `done` of `total` bytes the child holds copied into the parent, after each chunk of up to
  // 1 MiB (never called when the child holds nothing).
  CopyProgress progress;
  // Read before each chunk (a signal handler, or the progress callback, sets it): once true,
  // the copy stops, the parent is flushed and closed as after a whole commit (its unused
  // reservation given back, so it checks clean) and the call fails with Errc::kCancelled,
  // saying how far it got. What was copied stays in the parent; the child is unchanged, and
  // the same commit run again finishes the job. May be null.
  const std::atomic<bool>* stop = nullptr;
};

// Copies every sector the differencing VHD at `child_path` holds into its parent (a VHD file,
// opened for writing; the child is opened alone, read-only), then flushes and closes the parent.
// The child is left as it is and still reads the same. Returns the bytes copied. Errors: the
// child is not a differencing VHD or its parent is not a file (Errc::kInvalidArgument), the child
// holds data past the parent's end (kNoSpace), an open, read, write or flush failing (naming the
// offset). An interrupted commit leaves the child intact; run it again.
Result<uint64_t> CommitImage(const std::string& child_path, const CommitOptions& options = {});

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_IMAGETOOLS_COMMIT_H_
