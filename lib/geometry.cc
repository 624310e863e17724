#include "lib/geometry.h"

namespace vstack {

std::string CapabilitiesToString(Capabilities caps) {
  static constexpr struct {
    Capability cap;
    const char* name;
  } kNames[] = {
      {kCapRead, "read"},          {kCapWrite, "write"},
      {kCapFlush, "flush"},        {kCapDiscard, "discard"},
      {kCapWriteZeroes, "write_zeroes"}, {kCapFua, "fua"},
      {kCapDiscardZeroes, "discard_zeroes"}, {kCapFastZeroes, "fast_zeroes"},
      {kCapExtents, "extents"},    {kCapPersistent, "persistent"},
      {kCapThreadSafe, "thread_safe"}, {kCapResizable, "resizable"},
  };
  std::string out;
  for (const auto& n : kNames) {
    if (caps & n.cap) {
      if (!out.empty()) out += ',';
      out += n.name;
    }
  }
  return out;
}

}  // namespace vstack
