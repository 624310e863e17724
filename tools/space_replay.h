// Replay mode of `vstack space`: writes the written grains of the images through real dedup
// and zstd layers (one stack per dedup domain, over sparse memory or a sparse file in `dir`)
// and reads the layers' own accounting (Space(), and ZstdDevice::SpaceOf for the dedup data
// area, which leaves the dedup layer's own metadata out).
#ifndef VSTACK_TOOLS_SPACE_REPLAY_H_
#define VSTACK_TOOLS_SPACE_REPLAY_H_

#include <string>
#include <vector>

#include "tools/progress.h"
#include "tools/space_images.h"
#include "tools/space_model.h"

namespace vstack::cli {

// The spec of the stack that replays one domain of `virtual_size` bytes (without its backend).
std::string ReplayLayers(const SpaceOptions& o, uint64_t virtual_size);

// `dir` empty: the stacks sit on sparse memory; else on sparse files in `dir` (removed after).
Result<SpaceCounts> ReplayImages(std::vector<SpaceImage>& images, const SpaceOptions& o,
                                 const std::string& dir, Progress& progress);

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_SPACE_REPLAY_H_
