// The accuracy check of `vstack space --estimate` (docs/space-savings.md, "Estimates: accuracy"):
// for one set of images, how often the stated interval of each factor holds the exact scan's
// value over many sampling seeds. One exact pass records every distinct grain's fingerprint and
// sizes; each seed's sketch is then the distinct fingerprints its sampling hash keeps, which is
// exactly what SketchImages keeps (the check confirms that for the first seed).
#ifndef VSTACK_ANALYSIS_SPACE_ACCURACY_H_
#define VSTACK_ANALYSIS_SPACE_ACCURACY_H_

#include <string>
#include <vector>

#include "analysis/space/space_images.h"
#include "analysis/space/space_model.h"

namespace vstack {

// The factors checked, in the report's order.
inline constexpr const char* kAccuracyFactors[] = {"zero elimination", "dedup", "compression",
                                                   "metadata", "data reduction"};
inline constexpr size_t kAccuracyFactorCount = 5;

struct AccuracyResult {
  SpaceReport exact;
  uint64_t seeds = 0;
  uint64_t held[kAccuracyFactorCount] = {};  // runs whose interval held the exact value
  double width[kAccuracyFactorCount] = {};   // mean relative interval width
  double worst[kAccuracyFactorCount] = {};   // largest relative error of the point estimate
  double mean_sample = 0;                    // fingerprints kept, on average
  bool pass_matches = false;                 // SketchImages gave the first seed's sketch
};

// `o` with estimate set (dedup on, scope global); seeds 1..`seeds`.
Result<AccuracyResult> CheckAccuracy(std::vector<SpaceImage>& images, const SpaceOptions& o,
                                     uint64_t seeds);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_ACCURACY_H_
