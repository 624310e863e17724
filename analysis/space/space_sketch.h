// The sample behind `vstack space --estimate`, as a mergeable sketch (a .vss file written with
// --sketch, combined with `vstack space merge`). docs/space-savings.md, "Estimates", explains
// the sampling; this header is the data and its file format.
//
// With dedup on, every grain is read and hashed: the sketch counts used and zero grains
// exactly, and keeps the distinct fingerprints whose sampling hash is 0 mod M (content-based
// sampling, Xie, Condict and Shete, USENIX ATC '13), each with the compressed and stored size
// of its grain. With dedup off, grains are sampled by position (a hash of the image name and
// offset, 0 mod M) and only those are read and compressed. Either way the sample of a set of
// images does not depend on how they are split over runs: the sketch of a union equals the
// merge of the sketches of its parts (Merge).
//
// File format (little-endian): "VSTKSKCH", u32 version (1), the parameters, the counts, the
// sample, then a CRC-32C of everything before it. Parse checks every field.
#ifndef VSTACK_ANALYSIS_SPACE_SKETCH_H_
#define VSTACK_ANALYSIS_SPACE_SKETCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/space/space_interval.h"
#include "blockdev/dedup/fingerprint.h"
#include "blockdev/zstd/size_rule.h"
#include "lib/errors.h"

namespace vstack {

// What must match for two sketches to merge.
struct SketchParams {
  uint32_t grain = 4096;
  bool dedup = true;
  bool compress = true;
  int level = 1;
  SizeRule rule{SizeRule::kVsanOsa, 0};
  uint64_t seed = 0;       // of the sampling hash
  uint64_t modulus = 100;  // keep 1 in `modulus` (the sampling fraction is 1/modulus)
  uint64_t cap = 0;        // dedup: 0, or the most fingerprints kept (the modulus then doubles)
  bool operator==(const SketchParams&) const = default;
};

// Integer sums of sampled sizes (so that merging in any order gives the same bits).
struct SizeSums {
  uint64_t n = 0, sum = 0;
  unsigned __int128 sum_sq = 0;
  void Add(uint64_t v) {
    ++n;
    sum += v;
    sum_sq += static_cast<unsigned __int128>(v) * v;
  }
  SizeSums& operator+=(const SizeSums& o);
  SampleSums ToSample() const;
  bool operator==(const SizeSums&) const = default;
};

struct SampledGrain {
  Fingerprint fp;
  uint32_t compressed = 0;  // zstd's output, or the grain for one kept raw
  uint32_t stored = 0;      // under the stored-size rule
  bool operator==(const SampledGrain&) const = default;
};

struct SpaceSketch {
  SketchParams params;
  uint32_t shift = 0;  // dedup with a cap: fingerprints kept are 0 mod (modulus << shift)
  uint64_t images = 0;
  uint64_t provisioned_bytes = 0;
  uint64_t used_grains = 0;  // allocated grains (exact)
  uint64_t zero_grains = 0;  // dedup: every all-zero grain (exact); else those of zero extents
  uint64_t data_grains = 0;  // grains of data extents (read by dedup, sampled without)
  uint64_t bytes_read = 0;   // image bytes read
  // Dedup on: the sampled distinct fingerprints, sorted.
  std::vector<SampledGrain> sample;
  // Dedup off: grains sampled by position, how many were zero, the sizes of the others, and
  // how many of those were stored whole (raw, the grain's size: what the compression
  // interval needs, space_interval.h). A version 1 sketch did not count them (whole_known).
  uint64_t sampled_grains = 0, sampled_zero = 0, sampled_whole = 0;
  bool whole_known = true;
  SizeSums stored, compressed;

  bool operator==(const SpaceSketch&) const = default;
  // The fraction of fingerprints (dedup) or grains (no dedup) sampled.
  double Fraction() const;
};

// The sampling hash of a fingerprint, and whether it is in a sample of 1 in `modulus`.
uint64_t SampleHash(const Fingerprint& fp, uint64_t seed);
// The sampling hash of a grain position (dedup off).
uint64_t PositionHash(const std::string& image, uint64_t grain_index, uint64_t seed);

// Sorts sampled grains by fingerprint, the order of SpaceSketch::sample.
void SortByFingerprint(std::vector<SampledGrain>* grains);

// Adds `more` (a sorted, distinct run of sampled grains) to `s`'s sample and raises the shift
// while the sample is over the cap.
void AddSample(SpaceSketch* s, std::vector<SampledGrain> more);

// Combines `b` into `a`. Fails, saying which, when a parameter differs.
Status Merge(SpaceSketch* a, const SpaceSketch& b);

std::string SerializeSketch(const SpaceSketch& s);
// `what` names the input in errors (a file name).
Result<SpaceSketch> ParseSketch(const std::string& bytes, const std::string& what);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_SKETCH_H_
