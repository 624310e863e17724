// Replay mode of the space analysis (`vstack space --mode=replay`): writes the written grains of
// the images through real dedup and zstd layers (one stack per dedup domain, over sparse memory
// or a sparse file in `dir`) and asks the stack for its space through the device contract only
// (StackSpace).
#ifndef VSTACK_ANALYSIS_SPACE_REPLAY_H_
#define VSTACK_ANALYSIS_SPACE_REPLAY_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis/space/space_images.h"
#include "analysis/space/space_model.h"

namespace vstack {

// The spec of the stack that replays one domain of `virtual_size` bytes (without its backend),
// formatting its layers (format=on): the backend below is always one the replay just created.
std::string ReplayLayers(const SpaceOptions& o, uint64_t virtual_size);

// The counts of the data written into the stack under `top`, from its layers' own accounting
// (the device contract: Space() and SpaceOf()). The top-most layer with Space() gives the live,
// zero and unique grains; if the layer right below it answers SpaceOf() for the upper layer's
// data area (zstd under dedup), that gives the compressed and stored bytes, so the upper
// layer's metadata pages are left out. nullopt if no layer of the stack keeps space
// accounting. Metadata and provisioned bytes are left zero. With `physical_bytes`, also the
// bytes of the device below that hold that data: the compressing layer's bins that hold its
// fragments (a bin shared with the upper layer's metadata counts whole), else the top layer's
// physical bytes.
std::optional<SpaceCounts> StackSpace(const BlockDevice& top, uint64_t* physical_bytes = nullptr);

// What the replay stacks really used for the images' data, next to what the model stores: the
// model counts each grain at its stored size, the layers fill whole bins.
struct ReplayPhysical {
  uint64_t modelled_bytes = 0;  // the counts' stored_bytes (sizes under the rule)
  uint64_t physical_bytes = 0;  // bytes below that hold them (StackSpace), over every domain
  // physical / modelled - 1 (0 when nothing is stored).
  double difference() const {
    return modelled_bytes ? double(physical_bytes) / double(modelled_bytes) - 1 : 0;
  }
};

// `dir` empty: the stacks sit on sparse memory; else on sparse files in `dir` (removed after).
// `physical` (if not null) gets the physical bytes next to the modelled ones. Needs a layer to
// replay through (dedup, or a codec).
Result<SpaceCounts> ReplayImages(std::vector<SpaceImage>& images, const SpaceOptions& o,
                                 const std::string& dir, const SpaceProgress& progress,
                                 ReplayPhysical* physical = nullptr);

// The backend spec below domain `domain`'s replay stack, which must take `bytes` (written
// sparsely): the spec creates it (e.g. "rbd:rbd/img,create=on,size=...").
using ReplayBackend = std::function<std::string(uint32_t domain, uint64_t bytes)>;

// The same replay onto backends of the caller's choosing. The stacks are closed (everything
// flushed to the backends) before it returns; removing the backends is the caller's. With
// neither dedup nor a codec the stack is the backend alone: the images' data is written as it
// is, zero grains are counted by looking at them, and the physical bytes are the bytes written.
Result<SpaceCounts> ReplayImagesOnto(std::vector<SpaceImage>& images, const SpaceOptions& o,
                                     const ReplayBackend& backend, const SpaceProgress& progress,
                                     ReplayPhysical* physical = nullptr);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_REPLAY_H_
