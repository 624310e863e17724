// How subcommands take image arguments the way qemu-img users type them: qemu's format names
// (`vpc` is vhd), `-f FORMAT` to name a file's format instead of probing it, and which create
// errors are usage errors.
#ifndef VSTACK_TOOLS_IMAGE_ARGS_H_
#define VSTACK_TOOLS_IMAGE_ARGS_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "lib/errors.h"

namespace vstack::cli {

// vstack's name for an image format given as vstack or qemu-img names it: "vpc" -> "vhd";
// any other name is returned as it is.
std::string FormatName(const std::string& format);

// The image formats a command takes, as choices of its -f/-O option: the formats CreateImage
// makes (`creatable`: raw, vhd, vhdx) or the formats a file can be opened as (raw and every
// format with a probe), each with qemu's name vpc beside vhd.
std::vector<std::string> FormatChoices(bool creatable);

// The spec that opens `target` as `format` (qemu-img's -f): "file:PATH" for raw,
// "vhd+file:PATH" for vhd/vpc. With an empty format, `target` itself (a spec, or a path whose
// format OpenImage probes). A stack spec with a format, or an unknown format, is an error.
Result<std::string> ImageSpec(const std::string& target, const std::string& format);

// True for CreateImage's errors about the request itself (an unknown format or -o option, a bad
// value), which are usage errors, rather than about the file system. (A new file is made with
// the library's NewImageFile, imagetools/new_image_file.h.)
bool IsCreateUsageError(const Error& e);

// qemu-img's -U (--force-share) on a command that only reads images: they are opened without
// the locks qemu honours (OpenOptions::force_share), so that an image in use by a guest, qemu-io
// or a `vstack serve` can still be looked at.
void AddForceShareFlag(CLI::App* cmd, bool* force_share);

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_IMAGE_ARGS_H_
