// For a format's create hook (ComponentInfo::create): the new file an image is written into.
//
//   return CreateNewFile(path, NewImageFileSize(p),
//                        [&](BlockDevice& f) { return WriteNewImage(f, p); });
#ifndef VSTACK_LIB_NEW_FILE_H_
#define VSTACK_LIB_NEW_FILE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "lib/block_device.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// Creates the file `path` of `size` bytes (> 0) with the file backend, exclusively: O_EXCL
// refuses anything that exists at `path`, a symlink included. Runs `write` on it and returns it,
// open for reading and writing on the descriptor that created it. If `write` fails, the file
// is removed and its error returned. A path holding a NUL byte is refused
// (Errc::kInvalidArgument, RefuseNul in lib/spec.h).
Result<DevicePtr> CreateNewFile(const std::string& path, uint64_t size,
                                const std::function<Status(BlockDevice& file)>& write = {});

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_NEW_FILE_H_
