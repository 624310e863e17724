#include "lib/new_file.h"

#include <unistd.h>

#include "lib/registry.h"
#include "lib/spec.h"

namespace vstack {

Result<DevicePtr> CreateNewFile(const std::string& path, uint64_t size,
                                const std::function<Status(BlockDevice& file)>& write) {
  VSTACK_RETURN_IF_ERROR(RefuseNul(path, Errc::kInvalidArgument, "path"));
  // create=on,excl=on: the file is made by this open (docs/layers/file.md).
  SpecPart part{"file", path, {{"create", "on"}, {"excl", "on"}, {"size", std::to_string(size)}}};
  VSTACK_ASSIGN_OR_RETURN(DevicePtr file, Open(FormatSpecPart(part)));
  if (write) {
    if (Status s = write(*file); !s) {
      file.reset();
      ::unlink(path.c_str());
      return s.error();
    }
  }
  return file;
}

}  // namespace vstack
