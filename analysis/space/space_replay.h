// Replay mode of the space analysis (`vstack space --mode=replay`): writes the written grains of
// the images through real dedup and zstd layers (one stack per dedup domain, over sparse memory
// or a sparse file in `dir`) and asks the stack for its space through the device contract only
// (StackSpace).
#ifndef VSTACK_ANALYSIS_SPACE_REPLAY_H_
#define VSTACK_ANALYSIS_SPACE_REPLAY_H_

#include <optional>
#include <string>
#include <vector>

#include "analysis/space/space_images.h"
#include "analysis/space/space_model.h"

namespace vstack {

// The spec of the stack that replays one domain of `virtual_size` bytes (without its backend).
std::string ReplayLayers(const SpaceOptions& o, uint64_t virtual_size);

// The counts of the data written into the stack under `top`, from its layers' own accounting
// (the device contract: Space() and SpaceOf()). The top-most layer with Space() gives the live,
// zero and unique grains; if the layer right below it answers SpaceOf() for the upper layer's
// data area (zstd under dedup), that gives the compressed and stored bytes, so the upper
// layer's metadata pages are left out. nullopt if no layer of the stack keeps space
// accounting. Metadata and provisioned bytes are left zero.
std::optional<SpaceCounts> StackSpace(const BlockDevice& top);

// `dir` empty: the stacks sit on sparse memory; else on sparse files in `dir` (removed after).
Result<SpaceCounts> ReplayImages(std::vector<SpaceImage>& images, const SpaceOptions& o,
                                 const std::string& dir, const SpaceProgress& progress);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_REPLAY_H_
