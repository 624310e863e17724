#include "lib/extent.h"

namespace vstack {

void AppendExtent(std::vector<Extent>* out, uint64_t offset, uint64_t length, uint32_t flags) {
  if (length == 0) return;
  if (!out->empty()) {
    Extent& last = out->back();
    if (last.flags == flags && last.offset + last.length == offset) {
      last.length += length;
      return;
    }
  }
  out->push_back(Extent{offset, length, flags});
}

}  // namespace vstack
