// The JSON of a vstack space report (space_render.h): `vstack space --output=json`, and the
// dict the Python module returns.
#include "analysis/space/space_render.h"

namespace vstack {
namespace {

// What a sample holds: the part of the "estimate" object an estimate and a merge share.
nlohmann::json SampleJson(const SpaceSketch& s) {
  return {{"fraction", s.Fraction()},
          {"sample_fingerprints", s.sample.size()},
          {"sampled_grains", s.sampled_grains}};
}

// An estimate's sample, and what its pass cost.
nlohmann::json CostJson(const EstimateCost& c, const SpaceSketch& s, double seconds) {
  nlohmann::json j = SampleJson(s);
  j.update({{"bytes_covered", c.bytes_covered},
            {"bytes_read", c.bytes_read},
            {"bytes_hashed", c.bytes_hashed},
            {"bytes_compressed", c.bytes_compressed},
            {"nonzero_grains_hashed", c.nonzero_grains},
            {"peak_fingerprints", c.peak_fingerprints},
            {"peak_memory_bytes", c.peak_memory_bytes},
            {"seconds", seconds}});
  return j;
}

// A merge's sample, and what it combined.
nlohmann::json MergeJson(const SpaceSketch& s, size_t files) {
  nlohmann::json j = SampleJson(s);
  j.update({{"sketches", files}, {"bytes_read", s.bytes_read}});
  return j;
}

}  // namespace

nlohmann::json SpaceJson(const SpaceReport& r, const SpaceOptions& o,
                         const std::vector<SpaceImage>& images) {
  nlohmann::json steps = nlohmann::json::array();
  for (const SpaceStep& s : r.steps) {
    steps.push_back({{"step", s.key}, {"label", s.label}, {"bytes", s.bytes}, {"ratio", s.ratio}});
    if (r.confidence > 0) {
      steps.back().update({{"bytes_low", s.bytes_low},
                           {"bytes_high", s.bytes_high},
                           {"ratio_low", s.ratio_low},
                           {"ratio_high", s.ratio_high}});
    }
  }
  nlohmann::json imgs = nlohmann::json::array();
  for (const SpaceImage& i : images) {
    imgs.push_back({{"name", i.name},
                    {"spec", i.spec},
                    {"size_bytes", i.size},
                    {"used_bytes", i.used_bytes()}});
  }
  const SpaceCounts& c = r.counts;
  nlohmann::json j = {{"mode", SpaceModeName(o)},
                      {"options",
                       {{"scope", SpaceScopeName(o)},
                        {"grain", o.grain},
                        {"dedup", o.dedup},
                        {"codec", o.compress ? "zstd:" + std::to_string(o.level) : "none"},
                        {"rule", FormatSizeRule(o.rule)},
                        {"protection", o.protection},
                        {"protection_factor", ProtectionFactor(o.protection)},
                        {"checksum", o.checksum}}},
                      {"images", imgs},
                      {"counts",
                       {{"provisioned_bytes", c.provisioned_bytes},
                        {"used_grains", c.used_grains},
                        {"zero_grains", c.zero_grains},
                        {"unique_grains", c.unique_grains},
                        {"compressed_bytes", c.compressed_bytes},
                        {"stored_bytes", c.stored_bytes},
                        {"metadata_bytes", c.metadata_bytes}}},
                      {"steps", steps},
                      {"data_reduction", r.data_reduction},
                      {"overall", r.overall}};
  if (r.confidence > 0) {
    j["confidence"] = r.confidence;
    j["data_reduction_low"] = r.data_reduction_low;
    j["data_reduction_high"] = r.data_reduction_high;
    j["overall_low"] = r.overall_low;
    j["overall_high"] = r.overall_high;
  }
  return j;
}

nlohmann::json ReplayPhysicalJson(const ReplayPhysical& p) {
  return {{"modelled_bytes", p.modelled_bytes},
          {"physical_bytes", p.physical_bytes},
          {"difference_bytes", int64_t(p.physical_bytes) - int64_t(p.modelled_bytes)},
          {"difference", p.difference()}};
}

nlohmann::json CephMeasureJson(const CephSpaceResult& r, const SpaceOptions& o) {
  auto delta = [](const PoolDelta& d) {
    return nlohmann::json{{"stored", d.stored},           {"stored_data", d.stored_data},
                          {"stored_omap", d.stored_omap}, {"used", d.used},
                          {"used_data", d.used_data},     {"used_omap", d.used_omap},
                          {"objects", d.objects}};
  };
  nlohmann::json pools = nlohmann::json::array();
  for (const CephPoolMeasure& m : r.pools) {
    const CephEndToEnd e = EndToEndOf(r, m, o);
    nlohmann::json j = {
        {"pool", m.pool.name},
        {"scheme", m.pool.Scheme()},
        {"erasure", m.pool.erasure},
        {"size", m.pool.size},
        {"data_chunks", m.pool.data_chunks},
        {"stripe_unit", m.pool.stripe_unit},
        {"image", m.image},
        {"kept", m.kept},
        {"written_bytes", m.written_bytes},
        {"delta", delta(m.data)},
        {"measured_factor", m.measured_factor()},
        {"measured_data_factor", m.measured_data_factor()},
        {"modelled_factor", m.modelled_factor()},
        {"vsan_counterpart", VsanCounterpart(m.pool)},
        {"gap", m.factor_gap()},
        {"used_total", m.used_total()},
        {"measured_overall", e.measured},
        {"modelled_overall", e.modelled},
        {"why", ExplainGap(m, r.min_alloc_size)}};
    if (m.metadata_apart) j["metadata_pool_delta"] = delta(m.metadata);
    pools.push_back(std::move(j));
  }
  return {{"stack", r.layers.empty() ? "rbd" : r.layers + "+rbd"},
          {"logical_bytes", r.logical_bytes},
          {"min_alloc_size", r.min_alloc_size},
          {"pools", pools}};
}

nlohmann::json SpaceRunJson(const SpaceRun& run) {
  nlohmann::json j = SpaceJson(run.report, run.options, run.images);
  j["notes"] = run.notes;
  if (run.sketch) {
    j["estimate"] = run.merged_sketches ? MergeJson(*run.sketch, run.merged_sketches)
                                        : CostJson(run.cost, *run.sketch, run.seconds);
  }
  if (run.physical) j["physical"] = ReplayPhysicalJson(*run.physical);
  if (run.ceph) j["ceph"] = CephMeasureJson(*run.ceph, run.options);
  return j;
}

}  // namespace vstack
