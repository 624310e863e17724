// CommitImage and RebaseImage: the differencing-VHD chain operations of formats/vhd
// (vhd_chain_tools.h), behind the library's public calls.
#include <filesystem>

#include "formats/vhd/vhd_chain_tools.h"
#include "imagetools/commit.h"
#include "imagetools/rebase.h"
#include "lib/registry.h"
#include "lib/spec.h"

namespace vstack {

namespace {

// The format whose probe takes the file at `path` ("vhd", "vhdx"), or "" for none (raw, or a
// file that does not open: the VHD open that follows says why).
std::string ProbedFormat(const std::string& path) {
  OpenOptions ro;
  ro.read_only = true;
  Result<DevicePtr> file = Open(FormatSpecPart(SpecPart{"file", path, {}}), ro);
  if (!file) return "";
  for (const ComponentInfo* c : Registry::Global().All()) {
    if (c->probe && c->probe(**file)) return c->name;
  }
  return "";
}

// An error if the file at `path` (`role`: "the child") is an image of another format: only VHD
// has differencing images in vstack.
Status RequireVhd(const std::string& path, const std::string& role) {
  if (const std::string f = ProbedFormat(path); !f.empty() && f != "vhd") {
    return MakeError(Errc::kInvalidArgument,
                     role + " '" + path + "' is a " + f +
                         " image: commit and rebase work on differencing VHDs, and a VHD's "
                         "parent must be a VHD");
  }
  return OkStatus();
}

}  // namespace

Result<uint64_t> CommitImage(const std::string& child_path, const CommitOptions& options) {
  VSTACK_RETURN_IF_ERROR(RequireVhd(child_path, "the child"));
  return vhd::CommitImage(child_path, options.progress, options.stop);
}

Result<uint64_t> RebaseImage(const std::string& child_path, const std::string& new_parent,
                             const RebaseOptions& options) {
  if (options.backing_format != "vhd" && options.backing_format != "vpc") {
    return MakeError(Errc::kInvalidArgument, "a VHD's parent must be a VHD, not '" +
                                                 options.backing_format + "'");
  }
  // Another format says so by name; only VHD has differencing images in vstack.
  const std::filesystem::path dir = std::filesystem::path(child_path).parent_path();
  const std::string parent_path =
      std::filesystem::path(new_parent).is_absolute() || dir.empty()
          ? new_parent
          : (dir / new_parent).string();
  VSTACK_RETURN_IF_ERROR(RequireVhd(child_path, "the child"));
  VSTACK_RETURN_IF_ERROR(RequireVhd(parent_path, "the new parent"));
  return vhd::RebaseImage(child_path, new_parent, options.unsafe, options.progress, options.stop);
}

}  // namespace vstack
