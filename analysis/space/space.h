// `vstack space` as one library call: the knobs and the images in, the report out, with its
// figures and the JSON document `vstack space --output=json` prints (and the text, the SVG
// waterfall and the estimate's sketch). Nothing is printed and nothing is written: the caller
// writes the chart and the sketch where it wants them. The command line makes its reports with the
// same functions, so a program (or the Python module's vstack.space()) that calls
// AnalyzeSpace() with the same knobs on the same images gets the same document (an estimate's
// "seconds" aside). docs/space-savings.md explains the report.
//
// Threading: each call runs on the calling thread and on worker threads of its own
// (SpaceKnobs::threads); calls on unrelated knobs may run at once.
#ifndef VSTACK_ANALYSIS_SPACE_SPACE_H_
#define VSTACK_ANALYSIS_SPACE_SPACE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// --mode=ceph: where the images are replayed and measured.
struct CephSpaceOptions {
  std::vector<std::string> pools;     // where the data goes; replicated or EC (with overwrites)
  std::string metadata_pool = "rbd";  // replicated pool for the image headers of EC targets
  std::string conf;                   // ceph.conf ("" = $CEPH_CONF, then the default search)
  std::string id;                     // client id ("" = admin)
  // Reaching the monitors; waiting for the OSDs' statistics to reach them takes at most 12x.
  int timeout_s = 10;
  bool keep = false;  // keep the RBD images (else removed after measuring)
};

// Every option of `vstack space` as text, named as its flags (--scope is scope), with the
// command line's default (docs/space-savings.md).
struct SpaceKnobs {
  std::string scope = "global";       // global | image | groups=N
  std::string grain = "4K";           // a power of two from 4K to 64K
  std::string dedup = "on";           // on | off
  std::string codec = "zstd:1";       // zstd:LEVEL | none
  std::string rule = "vsan-osa";      // vsan-osa | sector | packed | min-saving=P
  std::string protection = "raid1";   // none | raid1 | ftt2 | raid5 | raid6
  std::string checksum = "on";        // on | off
  std::string mode = "scan";          // scan | replay | ceph
  std::string replay_dir;             // --mode=replay onto sparse files here ("": memory)
  unsigned threads = 0;               // 0: one per CPU
  bool estimate = false;              // sample instead of the exact scan
  std::string fraction;               // --estimate: "1%" or "0.01" ("": 1%)
  std::string accuracy;               // --estimate: a target accuracy such as "1%"
  std::string confidence = "95%";
  uint64_t seed = 0;                  // of the sampling hash
  std::string sketch;                 // --estimate: where the caller writes the sketch
  CephSpaceOptions ceph;              // --mode=ceph: --pool, --metadata-pool, ...
};

// How the caller follows a run.
struct SpaceHooks {
  // Called once on the calling thread before the analysis reads, with the bytes it will read
  // (the images' used bytes).
  std::function<void(uint64_t total_bytes)> on_start;
  // Called from the worker threads with the bytes read since the last call.
  std::function<void(uint64_t bytes)> on_progress;
  // Asked from the worker threads after each chunk of up to 4 MiB read (with on_progress); false
  // stops the analysis, which removes what it created (a replay's files, RBD images) and returns
  // Errc::kCancelled.
  std::function<bool()> keep_going;
};

// One line of the report, one step of its waterfall: provisioned, used, after zero elimination,
// dedup, compression, metadata, protection.
struct SpaceStep {
  std::string key;    // stable, as in the JSON's "step": provisioned, used, after_zero, ...
  std::string label;  // for people
  uint64_t bytes = 0;
  double ratio = 0;  // the previous step's bytes / this step's bytes (1 for the first)
  // An estimate's confidence interval; equal to bytes and ratio for an exact report.
  uint64_t bytes_low = 0, bytes_high = 0;
  double ratio_low = 0, ratio_high = 0;
};

struct SpaceResult {
  std::vector<SpaceStep> steps;
  double data_reduction = 0;  // used / (after compression + metadata), vSAN's ratio
  double overall = 0;         // used / after protection: logical / physical
  // An estimate's (or a merge's) confidence and the two ratios' intervals; 0, and equal to the
  // ratios, for an exact report.
  double confidence = 0;
  double data_reduction_low = 0, data_reduction_high = 0;
  double overall_low = 0, overall_high = 0;
  // The notes the command line prints on stderr: --scope groups=N with a group per image, images
  // whose size is not a multiple of the grain (JSON: "notes").
  std::vector<std::string> notes;
  // The document `vstack space --output=json` prints (2-space indents).
  std::string json;
  // The text report `vstack space` prints, and the chart `--svg` writes.
  std::string text;
  std::string svg;
  // An estimate's or a merge's sample, as the file `--sketch` writes (for MergeSpaceSketches);
  // "" for an exact analysis.
  std::string sketch;
};

// Checks `knobs`, opens `images` (image files or stack specs, read only) and runs the analysis
// they ask for: the scan, a replay through real dedup and zstd layers, a replay onto Ceph pools,
// or the estimate from a sample. Errors: knobs refused or that do not go together
// (kInvalidArgument, the command line's words naming the flag), an image that cannot be opened,
// a failed read or replay (the error names the image), kCancelled when hooks.keep_going said to
// stop.
Result<SpaceResult> AnalyzeSpace(const SpaceKnobs& knobs, const std::vector<std::string>& images,
                                 const SpaceHooks& hooks = {});

// `vstack space merge`: the combined estimate of sketch files (SpaceResult::sketch, or the
// command line's --sketch), reported with `knobs`' protection, checksum and confidence (the
// sketches' own sampling parameters replace the rest). Errors name the file.
Result<SpaceResult> MergeSpaceSketches(const SpaceKnobs& knobs,
                                       const std::vector<std::string>& sketch_files);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_ANALYSIS_SPACE_SPACE_H_
