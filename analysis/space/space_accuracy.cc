#include "analysis/space/space_accuracy.h"

#include <cmath>
#include <mutex>
#include <unordered_map>

#include "analysis/space/space_estimate.h"
#include "analysis/space/space_reader.h"
#include "blockdev/zstd/grain_codec.h"

namespace vstack {
namespace {

struct Hash {
  size_t operator()(const Fingerprint& fp) const { return static_cast<size_t>(fp.hi); }
};

// The ratio of a factor in a report: its step's ratio, or the data reduction.
void Factors(const SpaceReport& r, double value[], double low[], double high[]) {
  const size_t steps[] = {2, 3, 4, 5};
  for (size_t f = 0; f < 4; ++f) {
    value[f] = r.steps[steps[f]].ratio;
    low[f] = r.steps[steps[f]].ratio_low;
    high[f] = r.steps[steps[f]].ratio_high;
  }
  value[4] = r.data_reduction;
  low[4] = r.data_reduction_low;
  high[4] = r.data_reduction_high;
}

}  // namespace

Result<AccuracyResult> CheckAccuracy(std::vector<SpaceImage>& images, const SpaceOptions& o,
                                     uint64_t seeds) {
  const uint32_t grain = o.grain;
  std::mutex mu;
  std::unordered_map<Fingerprint, SampledGrain, Hash> distinct;
  uint64_t used = 0, zero = 0;
  std::vector<BlockDevice*> devices;
  for (auto& img : images) devices.push_back(img.device.get());
  const unsigned workers = WorkerCount(o.threads, devices);
  std::vector<std::unique_ptr<GrainCompressor>> compressors;
  for (unsigned w = 0; w < workers; ++w)
    compressors.push_back(std::make_unique<GrainCompressor>(o.level));
  auto visit = [&](unsigned w, const SpaceJob&, const std::byte* data, uint64_t grains) {
    std::vector<unsigned char> out(grain);
    uint64_t z = 0;
    for (uint64_t i = 0; i < grains; ++i) {
      const std::byte* g = data + i * grain;
      Fingerprint fp;
      if (!ClassifyGrain(g, grain, &fp)) {
        ++z;
        continue;
      }
      {
        std::lock_guard lock(mu);
        if (distinct.contains(fp)) continue;
      }
      SampledGrain s{fp, grain, grain};
      if (o.compress) {
        const EncodedGrain e = EncodeGrain(*compressors[w], o.rule, g, grain, out.data());
        s.compressed = e.form.compressed ? e.compressed : grain;
        s.stored = e.form.slot;
      }
      std::lock_guard lock(mu);
      distinct.emplace(fp, s);
    }
    std::lock_guard lock(mu);
    used += grains;
    zero += z;
  };
  VSTACK_RETURN_IF_ERROR(ReadImageGrains(images, workers, grain, visit, nullptr));

  SpaceSketch base;
  base.images = images.size();
  for (const SpaceImage& img : images) {
    base.provisioned_bytes += img.size;
    base.zero_grains += img.zero_grains(grain);
    base.used_grains += img.zero_grains(grain);
    base.bytes_read += img.data_bytes();
  }
  base.used_grains += used;
  base.zero_grains += zero;
  base.data_grains = used;

  AccuracyResult r;
  SpaceCounts c{
      base.provisioned_bytes, base.used_grains, base.zero_grains, distinct.size(), 0, 0, 0};
  for (const auto& [fp, s] : distinct) {
    c.compressed_bytes += s.compressed;
    c.stored_bytes += s.stored;
  }
  AddMetadata(o, grain, &c);
  r.exact = BuildReport(c, o);
  double truth[kAccuracyFactorCount], unused[kAccuracyFactorCount], unused2[kAccuracyFactorCount];
  Factors(r.exact, truth, unused, unused2);

  r.seeds = seeds;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    SpaceOptions so = o;
    so.seed = seed;
    SpaceSketch s = base;
    s.params = ParamsOf(so);
    std::vector<SampledGrain> kept;
    for (const auto& [fp, g] : distinct) {
      if (SampleHash(fp, seed) % so.modulus == 0) kept.push_back(g);
    }
    SortByFingerprint(&kept);
    AddSample(&s, std::move(kept));
    r.mean_sample += double(s.sample.size()) / double(seeds);
    if (seed == 1) {
      auto pass = SketchImages(images, so, nullptr, nullptr);
      if (!pass) return std::move(pass).error();
      r.pass_matches = *pass == s;
    }
    const SpaceReport e = EstimateReport(s, so);
    double value[kAccuracyFactorCount], low[kAccuracyFactorCount], high[kAccuracyFactorCount];
    Factors(e, value, low, high);
    for (size_t f = 0; f < kAccuracyFactorCount; ++f) {
      const double eps = 1e-12 * truth[f];
      if (low[f] - eps <= truth[f] && truth[f] <= high[f] + eps) ++r.held[f];
      r.width[f] += (high[f] - low[f]) / truth[f] / double(seeds);
      r.worst[f] = std::max(r.worst[f], std::fabs(value[f] - truth[f]) / truth[f]);
    }
  }
  return r;
}

}  // namespace vstack
