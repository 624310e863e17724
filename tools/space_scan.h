// Scan mode of `vstack space`: reads every written grain of the images and classifies it with
// the layers' own code (the zero test and XXH3-128 fingerprint from blockdev/dedup, GrainCompressor
// and the stored-size rule from blockdev/zstd), without writing anything.
#ifndef VSTACK_TOOLS_SPACE_SCAN_H_
#define VSTACK_TOOLS_SPACE_SCAN_H_

#include <vector>

#include "tools/progress.h"
#include "tools/space_images.h"
#include "tools/space_model.h"

namespace vstack::cli {

// The counts of every dedup domain, metadata included, summed.
Result<SpaceCounts> ScanImages(std::vector<SpaceImage>& images, const SpaceOptions& o,
                               Progress& progress);

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_SPACE_SCAN_H_
