// Checking an image's metadata: what `vstack check` does (qemu-img check), as a library call.
// Every layer of the stack checks its own metadata (BlockDevice::Check), top to bottom.
#ifndef VSTACK_IMAGETOOLS_CHECK_H_
#define VSTACK_IMAGETOOLS_CHECK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/block_device.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

struct LayerCheck {
  std::string kind;  // BlockDevice::kind(): "vhd", "dedup", "file"...
  CheckResult result;
};

struct ImageCheck {
  std::string spec;  // the spec opened: `spec_or_path` itself, or the one a path was probed as
  // Set when the image is too damaged to open even for checking (the open failed with
  // Errc::kCorruption or kChecksumMismatch): the open's message, counted as one corruption.
  std::string open_error;
  std::vector<LayerCheck> layers;  // top to bottom; empty when open_error is set

  uint64_t corruptions() const;
  uint64_t leaks() const;
  uint64_t repaired() const;
  bool clean() const { return corruptions() == 0 && leaks() == 0; }
  // qemu-img check's exit status, which `vstack check` exits with: 0 clean, 2 corruption,
  // 3 leaked space only.
  int exit_code() const;
  // "clean", "corrupt" or "leaks", as exit_code() says.
  std::string status() const;
};

// The JSON document `vstack check --output=json` prints (and Python's vstack.check() returns):
// {"spec", "status", "exit_code", "corruptions", "leaks", "repaired"[, "open_error"],
//  "layers": [{"kind", "corruptions", "leaks", "repaired", "messages": [...]}]}, top first.
std::string CheckJson(const ImageCheck& check);

// Opens `spec_or_path` (OpenImage) with OpenOptions::for_check, read-only unless `mode`
// repairs, runs every layer's Check(mode) and closes the stack. Errors: an open failing for
// another reason than damage (a missing file, a bad spec), a Check or the close failing (the
// message names the layer). `keep_going` (CheckResult::keep_going) is asked before each layer
// and by the checks that read data: false stops the check with Errc::kCancelled.
// `force_share` opens without the locks qemu honours (OpenOptions::force_share): read-only
// checks only.
Result<ImageCheck> CheckImage(std::string_view spec_or_path, CheckMode mode = CheckMode::kReadOnly,
                              const std::function<bool()>& keep_going = {},
                              bool force_share = false);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_IMAGETOOLS_CHECK_H_
