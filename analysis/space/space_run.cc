// vstack space's runs as library calls (space_run.h).
#include "analysis/space/space_run.h"

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/space/space_scan.h"
#include "lib/spec.h"

namespace vstack {

Result<SpaceRun> RunSpace(const SpaceOptions& o, const SpaceKnobs& k, std::vector<SpaceImage> images,
                          const SpaceProgress& progress) {
  SpaceRun run;
  run.options = o;
  run.image_count = images.size();
  for (std::string note : {ScopeNote(o, images.size()), PartialGrainNote(images, o.grain)}) {
    if (!note.empty()) run.notes.push_back(std::move(note));
  }
  if (o.estimate) {
    const auto start = std::chrono::steady_clock::now();
    VSTACK_ASSIGN_OR_RETURN(run.sketch, SketchImages(images, o, &run.cost, progress));
    run.report = EstimateReport(*run.sketch, o);
    run.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } else if (o.mode == SpaceOptions::Mode::kCeph) {
    VSTACK_ASSIGN_OR_RETURN(run.ceph, MeasureOnCeph(images, o, k.ceph, progress));
    run.report = BuildReport(run.ceph->counts, o);
    if (!run.ceph->layers.empty()) run.physical = run.ceph->physical;
  } else if (o.mode == SpaceOptions::Mode::kReplay) {
    ReplayPhysical physical;
    VSTACK_ASSIGN_OR_RETURN(const SpaceCounts counts,
                            ReplayImages(images, o, k.replay_dir, progress, &physical));
    run.report = BuildReport(counts, o);
    run.physical = physical;
  } else {
    VSTACK_ASSIGN_OR_RETURN(const SpaceCounts counts, ScanImages(images, o, progress));
    run.report = BuildReport(counts, o);
  }
  run.images = std::move(images);
  return run;
}

Result<SpaceSketch> MergeSketchFiles(const std::vector<std::string>& paths) {
  std::optional<SpaceSketch> merged;
  for (const std::string& path : paths) {
    VSTACK_RETURN_IF_ERROR(RefuseNul(path, Errc::kInvalidArgument, "sketch file's path"));
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return MakeError(std::error_code(EISDIR, std::generic_category()),
                       "'" + path + "' is a directory; give a sketch file");
    }
    errno = 0;
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      ec.assign(errno != 0 ? errno : EIO, std::system_category());
      return MakeError(Errc::kInvalidArgument, "cannot open '" + path + "': " + ec.message());
    }
    std::stringstream bytes;
    bytes << f.rdbuf();
    VSTACK_ASSIGN_OR_RETURN(SpaceSketch s, ParseSketch(bytes.str(), path));
    if (!merged) {
      merged = std::move(s);
      continue;
    }
    if (Status ok = Merge(&*merged, s); !ok) {
      return MakeError(ok.error().code, path + ": " + ok.error().message);
    }
  }
  if (!merged) return MakeError(Errc::kInvalidArgument, "no sketch to merge");
  return std::move(*merged);
}

SpaceRun MergedRun(SpaceSketch merged, SpaceOptions o, size_t files) {
  SpaceRun run;
  ApplyParams(merged.params, &o);
  run.options = o;
  run.report = EstimateReport(merged, o);
  run.image_count = static_cast<size_t>(merged.images);
  run.merged_sketches = files;
  run.sketch = std::move(merged);
  return run;
}

}  // namespace vstack
