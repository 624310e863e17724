#include "imagetools/map.h"

#include "formats/vhd/vhd_chain.h"
#include "formats/vhd/vhd_chain_tools.h"

namespace vstack {

uint64_t ImageMap::data_bytes() const {
  uint64_t n = 0;
  for (const ImageExtent& e : extents) n += e.flags == 0 ? e.length : 0;
  return n;
}

Result<ImageMap> MapImage(BlockDevice& top) {
  ImageMap map;
  const uint64_t size = top.geometry().size_bytes;
  const auto levels = vhd::ChainLevels(top);
  map.chain = levels.size() > 1;
  if (!map.chain) {
    std::vector<Extent> plain;
    VSTACK_RETURN_IF_ERROR(top.MapExtents(0, size, &plain));
    for (const Extent& e : plain) map.extents.push_back({e.offset, e.length, e.flags, 0, ""});
    return map;
  }
  std::vector<vhd::LevelExtent> found;
  VSTACK_RETURN_IF_ERROR(vhd::MapLevels(levels, 0, size, &found));
  for (const vhd::LevelExtent& e : found) {
    const std::string file =
        e.level < 0 ? "" : vhd::DevicePath(*levels[static_cast<size_t>(e.level)]->lower());
    map.extents.push_back({e.offset, e.length, e.flags, e.level, file});
  }
  return map;
}

std::vector<ChainImage> BackingChain(const std::string& spec, BlockDevice& top) {
  std::vector<ChainImage> out = {{spec, &top}};
  const auto levels = vhd::ChainLevels(top);
  for (size_t i = 1; i < levels.size(); ++i) {
    auto* level = const_cast<vhd::VhdDevice*>(levels[i]);
    const std::string path = vhd::DevicePath(*level->lower());
    out.push_back({path.empty() ? level->Describe() : "vhd+file:" + path, level});
  }
  return out;
}

}  // namespace vstack
