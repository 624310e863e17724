// How subcommands take image arguments the way qemu-img users type them: qemu's format names
// (`vpc` is vhd), `-f FORMAT` to name a file's format instead of probing it, and a destination
// that already exists (refused unless --overwrite).
#ifndef VSTACK_TOOLS_IMAGE_ARGS_H_
#define VSTACK_TOOLS_IMAGE_ARGS_H_

#include <string>

#include "lib/errors.h"

namespace vstack::cli {

// vstack's name for an image format given as vstack or qemu-img names it: "vpc" -> "vhd";
// any other name is returned as it is.
std::string FormatName(const std::string& format);

// The spec that opens `target` as `format` (qemu-img's -f): "file:PATH" for raw,
// "vhd+file:PATH" for vhd/vpc. With an empty format, `target` itself (a spec, or a path whose
// format OpenImage probes). A stack spec with a format, or an unknown format, is an error.
Result<std::string> ImageSpec(const std::string& target, const std::string& format);

// True for CreateImage's errors about the request itself (an unknown format or -o option, a bad
// value), which are usage errors, rather than about the file system.
bool IsCreateUsageError(const Error& e);

// A new image file to be made at `path`. If `path` exists, Claim() refuses it with a message
// saying to add --overwrite; with `overwrite` (and a regular file there, never a directory or a
// device) the new image is written under a temporary name next to it and renamed over it by
// Commit(), so that an error on the way leaves the existing file as it was.
class Destination {
 public:
  static Result<Destination> Claim(const std::string& path, bool overwrite);
  Destination(Destination&& other) noexcept;
  Destination& operator=(Destination&&) = delete;
  ~Destination();  // removes the temporary file unless committed

  // Where to create and write the image.
  const std::string& write_path() const { return temp_.empty() ? path_ : temp_; }
  // Puts the written image in place (renames the temporary file over `path`).
  Status Commit();

 private:
  Destination(std::string path, std::string temp)
      : path_(std::move(path)), temp_(std::move(temp)) {}
  std::string path_, temp_;
};

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_IMAGE_ARGS_H_
