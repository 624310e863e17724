// Operations on differencing-VHD chains behind `vstack commit`, `vstack rebase`,
// `vstack info --backing-chain` and `vstack map` (docs/layers/vhd.md, "Differencing disks").
#ifndef VSTACK_FORMATS_VHD_VHD_CHAIN_TOOLS_H_
#define VSTACK_FORMATS_VHD_VHD_CHAIN_TOOLS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/vhd/vhd_device.h"

namespace vstack::vhd {

// The VHD images of the chain whose top is `top` (a VhdDevice, or a stack with one on top),
// top first; empty if `top` is not a VHD.
std::vector<const VhdDevice*> ChainLevels(const BlockDevice& top);

// The loop that giving the image at `image_path` the parent `parent` (the top of a VHD chain)
// would make, as paths: "b.vhd -> c.vhd -> b.vhd"; "" if no level of that chain is the image.
std::string ParentLoop(const std::string& image_path, const BlockDevice& parent);

// An extent with the chain level that holds it (0 = top); level -1: no level holds it (zeros).
struct LevelExtent {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t flags = 0;  // ExtentFlag bits, as MapExtents reports them
  int level = -1;
};
// Maps [offset, offset + length) of the chain's top, level by level.
Status MapLevels(const std::vector<const VhdDevice*>& levels, uint64_t offset, uint64_t length,
                 std::vector<LevelExtent>* out);

// `progress(done, total)`: `done` of `total` bytes (fixed for the call) copied or compared so
// far, after each chunk of up to 1 MiB; may be empty.
using ChainProgress = std::function<void(uint64_t done, uint64_t total)>;

// `vstack commit CHILD` (CommitImage in <vstack/imagetools/commit.h>): copies every sector the
// differencing disk at `child_path` holds into its parent (opened for writing; the child is
// opened alone, read-only), then flushes the parent. The child is left as it is (it still reads
// the same). Returns the bytes copied. The child's data must lie within the parent's size.
// `stop` (may be null) is read before each chunk: once true, the parent is flushed and closed
// (its unused reservation given back) and the call fails with Errc::kCancelled.
Result<uint64_t> CommitImage(const std::string& child_path, const ChainProgress& progress,
                             const std::atomic<bool>* stop = nullptr);

// `vstack rebase -b NEW CHILD` (RebaseImage in <vstack/imagetools/rebase.h>): makes the VHD at
// `new_parent_path` (relative to the child's directory) the parent of the differencing disk at
// `child_path`. Safe mode first copies into the child every sector it does not hold whose
// content differs between the old chain and the new parent, so the child reads the same
// afterwards (progress counts the bytes compared); `unsafe` (-u) only rewrites the link. The
// link (header and locators) is rewritten in place: locator data first, flushed, then the
// header. A new parent whose chain holds the child (the child itself included) is refused
// (Errc::kInvalidArgument, naming the loop) before anything is written. Returns the bytes copied.
// `stop` (may be null) is read before each chunk of safe mode: once true, the child is flushed
// and closed with its old link and the call fails with Errc::kCancelled.
Result<uint64_t> RebaseImage(const std::string& child_path, const std::string& new_parent_path,
                             bool unsafe, const ChainProgress& progress,
                             const std::atomic<bool>* stop = nullptr);

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_CHAIN_TOOLS_H_
