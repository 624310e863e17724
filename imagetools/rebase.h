// Giving a differencing disk a new parent: what `vstack rebase` does (qemu-img rebase), as a
// library call. Differencing VHDs only (docs/layers/vhd.md, "Differencing disks").
#ifndef VSTACK_IMAGETOOLS_REBASE_H_
#define VSTACK_IMAGETOOLS_REBASE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "imagetools/convert.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

struct RebaseOptions {
  // The new parent's format; a VHD's parent must be a VHD: "vhd" (or qemu's name, "vpc").
  std::string backing_format = "vhd";
  // Only rewrite the link (qemu-img rebase -u): the child's content may change.
  bool unsafe = false;
  // Safe mode: `done` of `total` bytes compared (every byte the child does not hold itself),
  // after each chunk of up to 1 MiB. Never called in unsafe mode.
  CopyProgress progress;
  // Safe mode: read before each chunk (a signal handler, or the progress callback, sets it):
  // once true, the copy stops, the child is flushed and closed with its old link (its unused
  // reservation given back) and the call fails with Errc::kCancelled, saying how far it got.
  // The child reads as before (what was copied into it is what the old chain showed there),
  // and the same rebase run again finishes the job. May be null.
  const std::atomic<bool>* stop = nullptr;
};

// Makes the VHD at `new_parent` (a path relative to the child's directory, or absolute) the
// parent of the differencing VHD at `child_path`. Safe mode first copies into the child every
// sector it does not hold whose content differs between its old chain and the new parent, so
// that it reads the same afterwards; then the link (locators, then the header) is rewritten in
// place. Returns the bytes copied into the child. Errors: another backing format, a child that
// is not a differencing VHD (Errc::kInvalidArgument), a parent that does not open, I/O errors.
Result<uint64_t> RebaseImage(const std::string& child_path, const std::string& new_parent,
                             const RebaseOptions& options = {});

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_IMAGETOOLS_REBASE_H_
