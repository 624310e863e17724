// Where an image's data lives, and which images a differencing chain is made of: what
// `vstack map` (qemu-img map) and `vstack info --backing-chain` (qemu-img info --backing-chain)
// show, as library calls. On a differencing-VHD chain each extent names the level that holds it
// (docs/layers/vhd.md, "Differencing disks"); on any other stack the extents are MapExtents'.
#ifndef VSTACK_IMAGETOOLS_MAP_H_
#define VSTACK_IMAGETOOLS_MAP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lib/block_device.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

struct ImageExtent {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t flags = 0;  // ExtentFlag bits, as MapExtents reports them (0: data)
  int level = 0;       // chain level holding it, 0 = the top image; -1: no level (zeros)
  std::string file;    // that level's file on a chain (qemu-img map's "file"); "" otherwise
};

struct ImageMap {
  bool chain = false;  // the top is a differencing VHD: levels and files are meaningful
  std::vector<ImageExtent> extents;  // covering the virtual disk, in offset order
  uint64_t data_bytes() const;       // the bytes of extents with flags == 0
};

// Maps the whole virtual disk of `top` (qemu-img map). Errors: MapExtents' (or a level's).
Result<ImageMap> MapImage(BlockDevice& top);

struct ChainImage {
  std::string spec;      // names the image: "vhd+file:PATH", or its description if not a file
  BlockDevice* device;   // owned by the stack; valid while it is open
};

// The stack `top` (opened from `spec`), then each parent of a differencing-VHD chain, top
// first; just the stack when it is not one.
std::vector<ChainImage> BackingChain(const std::string& spec, BlockDevice& top);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_IMAGETOOLS_MAP_H_
