// The model behind `vstack space`: its options, the counts a scan or a replay produces, and the
// factor-by-factor report built from them (docs/space-savings.md).
//
// Both modes produce the same SpaceCounts for the same images and options; the report, the
// metadata model and the ratios are computed from the counts alone, so scan and replay print
// identical reports whenever they agree on the counts.
#ifndef VSTACK_ANALYSIS_SPACE_MODEL_H_
#define VSTACK_ANALYSIS_SPACE_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/space/space.h"
#include "blockdev/zstd/size_rule.h"
#include "lib/errors.h"

namespace vstack {

struct SpaceOptions {
  enum class Scope { kGlobal, kImage, kGroups };
  Scope scope = Scope::kGlobal;
  uint32_t groups = 1;  // kGroups: image i goes to dedup domain i mod groups
  uint32_t grain = 4096;
  bool dedup = true;
  bool compress = true;  // --codec zstd:N; false for --codec none
  int level = 1;
  SizeRule rule{SizeRule::kVsanOsa, 0};
  std::string protection = "raid1";  // none, raid1, ftt2, raid5, raid6
  bool checksum = true;              // 5 bytes per 4 KiB stored, as vSAN
  // scan, replay (through real layers on memory or files), ceph (replay onto RBD images in
  // Ceph pools and measure the pools' usage: space_ceph.h).
  enum class Mode { kScan, kReplay, kCeph };
  Mode mode = Mode::kScan;
  unsigned threads = 0;  // 0: one per CPU
  // --estimate (space_estimate.h): sample 1 in `modulus` fingerprints (grains without dedup),
  // or, with `cap`, keep at most `cap` fingerprints (the modulus doubles when over it).
  bool estimate = false;
  uint64_t modulus = 100;
  uint64_t cap = 0;
  double confidence = 0.95;
  uint64_t seed = 0;  // of the sampling hash
};

// Parses --scope (global, image, groups=N), --codec (zstd:N, none) and --protection.
Status ParseScope(const std::string& text, SpaceOptions* o);
Status ParseCodec(const std::string& text, SpaceOptions* o);
Status ParseProtection(const std::string& text, SpaceOptions* o);
// Raw bytes per usable byte of a protection scheme: raid1 2, ftt2 3, raid5 4/3, raid6 3/2.
double ProtectionFactor(const std::string& protection);
std::string DescribeProtection(const std::string& protection);

// The dedup domain of image `index` under `o`.
uint32_t DomainOf(const SpaceOptions& o, size_t index, size_t images);
uint32_t DomainCount(const SpaceOptions& o, size_t images);

// What a scan or a replay finds in one dedup domain, or summed over all of them.
struct SpaceCounts {
  uint64_t provisioned_bytes = 0;  // virtual sizes of the images
  uint64_t used_grains = 0;        // grains holding allocated (written) data
  uint64_t zero_grains = 0;        // of those, all zeros
  uint64_t unique_grains = 0;      // distinct non-zero grains (every non-zero one without dedup)
  uint64_t compressed_bytes = 0;   // their compressed sizes (the grain for one kept raw)
  uint64_t stored_bytes = 0;       // their sizes under the stored-size rule
  uint64_t metadata_bytes = 0;     // dedup map and grain table, compression map and bin table,
                                   // checksums: see AddMetadata

  bool operator==(const SpaceCounts&) const = default;
  SpaceCounts& operator+=(const SpaceCounts& o);
};

// before / after, a reduction's factor: 1 when both are 0 (nothing was there to reduce) and
// +infinity when only `after` is (the step removed everything, e.g. zero elimination of an
// image that holds only zeros). Text prints the latter as "all"; JSON as null.
double ReductionRatio(double before, double after);

// Adds to `c` (the counts of one domain) the metadata the layers would keep for it, in their own
// page formats (GrainFormat::MetadataBytes), plus 5 bytes per 4 KiB stored for
// checksums.
void AddMetadata(const SpaceOptions& o, uint32_t grain, SpaceCounts* c);

struct SpaceReport {
  std::vector<SpaceStep> steps;  // one line of the report each (space.h)
  double data_reduction = 0;  // used / (after compression + metadata), vSAN's ratio
  double overall = 0;         // used / after protection: logical / physical
  SpaceCounts counts;
  // Set by the estimate (space_estimate.h): the intervals' confidence, and the two ratios'
  // intervals; 0 and equal to the ratios for an exact report.
  double confidence = 0;
  double data_reduction_low = 0, data_reduction_high = 0;
  double overall_low = 0, overall_high = 0;
};

SpaceReport BuildReport(const SpaceCounts& counts, const SpaceOptions& o);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_MODEL_H_
