#include "lib/space_usage.h"

namespace vstack {

void AppendSpaceProperties(const SpaceUsage& u, PropertyList& out) {
  out.push_back({"space_grain", uint64_t{u.grain_bytes}, "bytes"});
  out.push_back({"space_logical_bytes_written", u.logical_bytes_written, "bytes"});
  out.push_back({"space_logical_bytes_live", u.logical_bytes_live, "bytes"});
  out.push_back({"space_zero_grains", u.zero_grains, ""});
  out.push_back({"space_unique_grains", u.unique_grains, ""});
  out.push_back({"space_compressed_bytes", u.compressed_bytes, "bytes"});
  out.push_back({"space_stored_bytes", u.stored_bytes, "bytes"});
  out.push_back({"space_physical_bytes_used", u.physical_bytes_used, "bytes"});
  out.push_back({"space_metadata_bytes", u.metadata_bytes, "bytes"});
}

}  // namespace vstack
