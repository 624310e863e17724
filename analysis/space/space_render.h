// The forms of a `vstack space` report, all made from one SpaceRun (space_run.h): the text the
// command prints, the JSON of --output=json (which the Python module returns as a dict), and the
// SVG waterfall of --svg. Rendering only: the figures come from the model and the analysis.
#ifndef VSTACK_ANALYSIS_SPACE_RENDER_H_
#define VSTACK_ANALYSIS_SPACE_RENDER_H_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "analysis/space/space.h"
#include "analysis/space/space_ceph.h"
#include "analysis/space/space_images.h"
#include "analysis/space/space_model.h"
#include "analysis/space/space_replay.h"
#include "analysis/space/space_run.h"

namespace vstack {

// Every form of a run's report at once, with its figures: what AnalyzeSpace() and
// MergeSpaceSketches() return (space.h), and what the command line prints and writes.
SpaceResult SpaceResultOf(const SpaceRun& run);

// A whole run, as `vstack space` prints it: the report, then the estimate's cost (or the merge),
// the replay's physical bytes and the Ceph measurement, when the run has them.
std::string SpaceRunText(const SpaceRun& run);
// The same as JSON: the report's object with "notes", and "estimate", "physical" and "ceph" when
// the run has them.
nlohmann::json SpaceRunJson(const SpaceRun& run);
// The run's waterfall chart.
std::string SpaceRunSvg(const SpaceRun& run);

// "8 images, scope global, grain 4 KiB, dedup on, codec zstd:1, rule vsan-osa, RAID-1..., scan".
std::string DescribeSpaceRun(const SpaceOptions& o, size_t images);
// "scan", "replay", "replay onto Ceph" or "estimate".
std::string SpaceModeName(const SpaceOptions& o);
// "global", "image" or "groups=N".
std::string SpaceScopeName(const SpaceOptions& o);
// A ratio to two decimals, or "∞" for a step that removed everything (ReductionRatio).
std::string SpaceRatioNumber(double ratio);
// "1.82x (1.79–1.85)" for an estimated ratio, "1.82x" for an exact one (low == high).
std::string SpaceRatioText(double ratio, double low, double high);

std::string SpaceText(const SpaceReport& r, const SpaceOptions& o, size_t images);
nlohmann::json SpaceJson(const SpaceReport& r, const SpaceOptions& o,
                         const std::vector<SpaceImage>& images);
// A replay's physical bytes against the modelled ones: a text paragraph, and the JSON object
// `vstack space --mode=replay --output=json` puts under "physical".
std::string ReplayPhysicalText(const ReplayPhysical& p);
nlohmann::json ReplayPhysicalJson(const ReplayPhysical& p);
// A Ceph measurement (`vstack space --mode=ceph`): per pool the STORED and USED deltas, the
// measured USED/STORED against the modelled factor, the end-to-end logical/USED against the
// model's, and why they differ; as text, and the JSON object put under "ceph".
std::string CephMeasureText(const CephSpaceResult& r, const SpaceOptions& o);
nlohmann::json CephMeasureJson(const CephSpaceResult& r, const SpaceOptions& o);

// The chart's vertical axis: ticks every `step` bytes up to `clip`, the plot's top at `max`.
// The provisioned bar is cut (drawn up to `clip` with a zigzag) only when it is over 3x every
// other bar; then no tick is above `clip`. Uncut, every bar and its label fit under `max`.
struct SpaceChartScale {
  uint64_t step = 0, max = 0, clip = 0;
  bool cut = false;
};
SpaceChartScale ChartScale(const SpaceReport& r, int plot_height);

// A waterfall: one bar per step, the change from the previous step drawn on top of it.
std::string SpaceSvg(const SpaceReport& r, const SpaceOptions& o, size_t images);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_RENDER_H_
