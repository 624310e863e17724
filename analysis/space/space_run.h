// `vstack space` as library calls: the exact analysis (a scan, a replay through real layers, or
// a replay onto Ceph pools), the estimate from a sample, and the merge of sketches, each giving
// a SpaceRun that holds everything its report shows (space_render.h turns it into the text, the
// JSON and the chart). The command line and the Python module both run the analysis this way.
#ifndef VSTACK_ANALYSIS_SPACE_RUN_H_
#define VSTACK_ANALYSIS_SPACE_RUN_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "analysis/space/space_ceph.h"
#include "analysis/space/space_estimate.h"
#include "analysis/space/space_images.h"
#include "analysis/space/space_knobs.h"
#include "analysis/space/space_model.h"
#include "analysis/space/space_replay.h"
#include "analysis/space/space_sketch.h"

namespace vstack {

struct SpaceRun {
  SpaceOptions options;  // as the report was made (a merge's carry the sketches' parameters)
  SpaceReport report;
  std::vector<SpaceImage> images;  // the images analysed (none for a merge)
  size_t image_count = 0;          // images the report speaks for (a merge: the sketches')
  std::vector<std::string> notes;  // ScopeNote() and PartialGrainNote(), those not empty
  // The estimate's sample (an estimate or a merge), what the pass cost and how long it took.
  std::optional<SpaceSketch> sketch;
  EstimateCost cost;
  double seconds = 0;
  size_t merged_sketches = 0;              // a merge: the files merged
  std::optional<ReplayPhysical> physical;  // a replay (also onto Ceph, when layers ran)
  std::optional<CephSpaceResult> ceph;     // --mode=ceph
};

// Analyses `images` (OpenSpaceImages(names, options.grain)) as `options` (SpaceOptionsFrom(knobs))
// say: the estimate, the measurement on Ceph, a replay, or the scan; `knobs` gives replay_dir and
// the Ceph options. `progress` is told the bytes done, from the worker threads, and stops the run
// (kCancelled) by returning false. Errors of options that do not go together are kInvalidArgument
// (a usage error).
Result<SpaceRun> RunSpace(const SpaceOptions& options, const SpaceKnobs& knobs,
                          std::vector<SpaceImage> images, const SpaceProgress& progress);

// Reads sketch files (`vstack space --estimate --sketch`) and merges them into one. Errors name
// the file.
Result<SpaceSketch> MergeSketchFiles(const std::vector<std::string>& paths);

// The report of `merged` (of `files` sketch files) under `options`, whose sampling parameters
// the sketch's replace (`vstack space merge`).
SpaceRun MergedRun(SpaceSketch merged, SpaceOptions options, size_t files);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_RUN_H_
