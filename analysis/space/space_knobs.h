// `vstack space`'s knobs as text, named as its flags (--scope is scope), and their one check:
// what the command line and the Python module hand to the analysis, so both refuse the same
// options with the same words.
#ifndef VSTACK_ANALYSIS_SPACE_KNOBS_H_
#define VSTACK_ANALYSIS_SPACE_KNOBS_H_

#include <cstdint>
#include <string>

#include "analysis/space/space_ceph.h"
#include "analysis/space/space_model.h"
#include "lib/errors.h"

namespace vstack {

// Every option of `vstack space` with the command line's default (docs/space-savings.md).
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

// The options of the analysis, every knob checked. Errors (kInvalidArgument, a usage error) are
// the command line's words and name the flag: "--grain 3K: not a power of two from 4K to 64K".
Result<SpaceOptions> SpaceOptionsFrom(const SpaceKnobs& knobs);

// "1%" or "0.01" -> 0.01: a fraction in (0, 1]; errors name `flag`.
Result<double> ParseFraction(const std::string& flag, const std::string& text);

// The note a report carries when --scope groups=N puts every one of `images` images in a group
// of its own (the same as --scope image); "" otherwise.
std::string ScopeNote(const SpaceOptions& o, size_t images);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_KNOBS_H_
