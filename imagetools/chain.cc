// CommitImage and RebaseImage: the differencing-VHD chain operations of formats/vhd
// (vhd_chain_tools.h), behind the library's public calls.
#include "formats/vhd/vhd_chain_tools.h"
#include "imagetools/commit.h"
#include "imagetools/rebase.h"

namespace vstack {

Result<uint64_t> CommitImage(const std::string& child_path, const CommitOptions& options) {
  return vhd::CommitImage(child_path, options.progress);
}

Result<uint64_t> RebaseImage(const std::string& child_path, const std::string& new_parent,
                             const RebaseOptions& options) {
  if (options.backing_format != "vhd" && options.backing_format != "vpc") {
    return MakeError(Errc::kInvalidArgument, "a VHD's parent must be a VHD, not '" +
                                                 options.backing_format + "'");
  }
  return vhd::RebaseImage(child_path, new_parent, options.unsafe, options.progress);
}

}  // namespace vstack
