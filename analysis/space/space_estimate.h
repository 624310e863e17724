// Estimate mode of the space analysis (`vstack space --estimate`): one pass that builds a
// SpaceSketch (space_sketch.h) without the exact scan's cost, and the report with a confidence
// interval for every factor built from a sketch (docs/space-savings.md, "Estimates").
//
// Zero extents and holes come from the extent maps (never read). With dedup on every data grain
// is read and hashed (zero test and XXH3, as ClassifyGrain), but only the sampled distinct
// fingerprints are kept, and only their grains are compressed (EncodeGrain), so dedup and
// compression are estimated from the same sample of unique grains: stored bytes = sampled
// stored bytes / fraction. With dedup off only the grains sampled by position are read.
#ifndef VSTACK_ANALYSIS_SPACE_ESTIMATE_H_
#define VSTACK_ANALYSIS_SPACE_ESTIMATE_H_

#include <memory>
#include <vector>

#include "analysis/space/space_images.h"
#include "analysis/space/space_model.h"
#include "analysis/space/space_sketch.h"

namespace vstack {

// What one estimate pass cost (not part of the sketch: it depends on the run, not the data).
struct EstimateCost {
  uint64_t bytes_covered = 0;      // allocated bytes the estimate speaks for
  uint64_t bytes_read = 0;         // read from the images
  uint64_t bytes_hashed = 0;       // fingerprinted (dedup)
  uint64_t bytes_compressed = 0;   // put through the codec
  uint64_t peak_fingerprints = 0;  // most sampled fingerprints held at once, over all workers
  uint64_t peak_memory_bytes = 0;  // about that many bytes of sample in memory
  uint64_t nonzero_grains = 0;     // grains hashed that were not all zeros (dedup)
};

// The sketch parameters of `o`, and `o` with the parameters of a sketch.
SketchParams ParamsOf(const SpaceOptions& o);
void ApplyParams(const SketchParams& p, SpaceOptions* o);

// The fingerprint cap for a target relative accuracy at `confidence`: twice (z / accuracy)^2,
// so that the sample ends with at least (z / accuracy)^2 fingerprints when the data has them.
uint64_t CapFor(double accuracy, double confidence);

// Builds one worker's part of a sketch from grains (the pass runs one per worker thread; tests
// feed it synthetic grains). Not thread-safe.
class SketchWorker {
 public:
  explicit SketchWorker(const SpaceOptions& o);
  ~SketchWorker();
  // Dedup on: a grain of data (every one is given).
  void Grain(const std::byte* g);
  // Dedup off: a grain sampled by position (only those are given).
  void SampledGrain(const std::byte* g);
  // Adds this worker's counts and sample to `s` (whose parameters match).
  void AddTo(SpaceSketch* s);
  const EstimateCost& cost() const { return cost_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  EstimateCost cost_;
};

// One pass over `images` (scope global only). `cost` may be null.
Result<SpaceSketch> SketchImages(std::vector<SpaceImage>& images, const SpaceOptions& o,
                                 EstimateCost* cost, const SpaceProgress& progress);

// The report of a sketch, every step with its interval at `o.confidence`.
SpaceReport EstimateReport(const SpaceSketch& s, const SpaceOptions& o);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_ESTIMATE_H_
