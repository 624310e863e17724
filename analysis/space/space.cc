// AnalyzeSpace() and MergeSpaceSketches(): vstack space as one call (space.h), made of the knobs'
// check, the run (space_run.h) and the report's forms (space_render.h).
#include "analysis/space/space.h"

#include <utility>

#include "analysis/space/space_knobs.h"
#include "analysis/space/space_render.h"
#include "analysis/space/space_run.h"

namespace vstack {

SpaceResult SpaceResultOf(const SpaceRun& run) {
  SpaceResult r;
  const SpaceReport& report = run.report;
  r.steps = report.steps;
  r.data_reduction = report.data_reduction;
  r.overall = report.overall;
  r.confidence = report.confidence;
  r.data_reduction_low = report.data_reduction_low;
  r.data_reduction_high = report.data_reduction_high;
  r.overall_low = report.overall_low;
  r.overall_high = report.overall_high;
  r.notes = run.notes;
  r.json = SpaceRunJson(run).dump(2);
  r.text = SpaceRunText(run);
  r.svg = SpaceRunSvg(run);
  if (run.sketch) r.sketch = SerializeSketch(*run.sketch);
  return r;
}

Result<SpaceResult> AnalyzeSpace(const SpaceKnobs& knobs, const std::vector<std::string>& images,
                                 const SpaceHooks& hooks) {
  VSTACK_ASSIGN_OR_RETURN(const SpaceOptions options, SpaceOptionsFrom(knobs));
  VSTACK_ASSIGN_OR_RETURN(std::vector<SpaceImage> opened,
                          OpenSpaceImages(images, options.grain));
  if (hooks.on_start) {
    uint64_t total = 0;
    for (const SpaceImage& i : opened) total += i.used_bytes();
    hooks.on_start(total);
  }
  const SpaceProgress progress = [&hooks](uint64_t bytes) {
    if (hooks.on_progress) hooks.on_progress(bytes);
    return !hooks.keep_going || hooks.keep_going();
  };
  VSTACK_ASSIGN_OR_RETURN(const SpaceRun run,
                          RunSpace(options, knobs, std::move(opened), progress));
  return SpaceResultOf(run);
}

Result<SpaceResult> MergeSpaceSketches(const SpaceKnobs& knobs,
                                       const std::vector<std::string>& sketch_files) {
  VSTACK_ASSIGN_OR_RETURN(SpaceSketch merged, MergeSketchFiles(sketch_files));
  SpaceKnobs report_knobs = knobs;  // the report's options; the sketch's parameters replace the rest
  report_knobs.sketch.clear();
  VSTACK_ASSIGN_OR_RETURN(const SpaceOptions options, SpaceOptionsFrom(report_knobs));
  return SpaceResultOf(MergedRun(std::move(merged), options, sketch_files.size()));
}

}  // namespace vstack
