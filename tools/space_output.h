// The three forms of a `vstack space` report, all from the same SpaceReport: a text table,
// JSON (--output=json) and an SVG waterfall chart (--svg FILE).
#ifndef VSTACK_TOOLS_SPACE_OUTPUT_H_
#define VSTACK_TOOLS_SPACE_OUTPUT_H_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "analysis/space/space_ceph.h"
#include "analysis/space/space_images.h"
#include "analysis/space/space_model.h"
#include "analysis/space/space_replay.h"

namespace vstack::cli {

// "8 images, scope global, grain 4 KiB, dedup on, codec zstd:1, rule vsan-osa, RAID-1..., scan".
std::string DescribeSpaceRun(const SpaceOptions& o, size_t images);

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

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_SPACE_OUTPUT_H_
