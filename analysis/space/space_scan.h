// Scan mode of the space analysis (`vstack space --mode=scan`): reads every written grain of the
// images and puts it through the layers' own grain pipeline, without writing anything:
// ClassifyGrain (blockdev/dedup/fingerprint.h: zero test, XXH3-128) where dedup is on, then
// EncodeGrain (blockdev/zstd/grain_codec.h: zero test, zstd, stored-size rule) where a codec is.
// The dedup and zstd layers store each grain through exactly these calls, so the model cannot
// drift from them.
#ifndef VSTACK_ANALYSIS_SPACE_SCAN_H_
#define VSTACK_ANALYSIS_SPACE_SCAN_H_

#include <vector>

#include "analysis/space/space_images.h"
#include "analysis/space/space_model.h"

namespace vstack {

// The counts of every dedup domain, metadata included, summed.
Result<SpaceCounts> ScanImages(std::vector<SpaceImage>& images, const SpaceOptions& o,
                               const SpaceProgress& progress);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_SCAN_H_
