#include "imagetools/info.h"

#include "imagetools/info_json.h"
#include "imagetools/map.h"
#include "lib/property.h"

namespace vstack {
namespace {

nlohmann::json PropertiesJson(const PropertyList& props) {
  nlohmann::json j = nlohmann::json::object();
  for (const Property& p : props) {
    j[p.key] = std::visit([](const auto& x) { return nlohmann::json(x); }, p.value);
  }
  return j;
}

nlohmann::json GeometryJson(const Geometry& g) {
  return {{"size_bytes", g.size_bytes},         {"logical_block", g.logical_block},
          {"physical_block", g.physical_block}, {"mem_alignment", g.mem_alignment},
          {"max_transfer", g.max_transfer},     {"optimal_transfer", g.optimal_transfer}};
}

// ["read", "write", ...]: the names CapabilitiesToString joins with commas.
nlohmann::json CapabilitiesJson(Capabilities caps) {
  nlohmann::json j = nlohmann::json::array();
  const std::string s = CapabilitiesToString(caps);
  size_t start = 0;
  while (start < s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    j.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return j;
}

}  // namespace

nlohmann::json LayerStatsJson(const LayerStats& stats, bool latency) {
  nlohmann::json ops = nlohmann::json::object();
  for (int i = 0; i < kOpCount; ++i) {
    const auto& h = stats.latency[i];
    nlohmann::json latency_ns;  // null: not measured
    if (latency || h.count() > 0) {
      latency_ns = {{"mean", h.mean()},
                    {"p50", h.Percentile(50)},
                    {"p99", h.Percentile(99)},
                    {"max", h.max()}};
    }
    ops[std::string(OpName(static_cast<Op>(i)))] = {{"ops", stats.op[i].ops},
                                                    {"bytes", stats.op[i].bytes},
                                                    {"errors", stats.op[i].errors},
                                                    {"latency_ns", std::move(latency_ns)}};
  }
  nlohmann::json counters = nlohmann::json::object();
  for (size_t i = 0; i < stats.counter_names.size(); ++i) {
    counters[stats.counter_names[i]] = stats.counters[i];
  }
  return {{"ops", ops}, {"in_flight", stats.in_flight}, {"counters", counters}};
}

nlohmann::json LayerStatsJson(const BlockDevice& d) {
  return LayerStatsJson(d.Stats(), d.stats_mode() == StatsMode::kLatency);
}

nlohmann::json InfoJsonValue(const std::string& spec, BlockDevice& top,
                             const InfoOptions& options) {
  nlohmann::json layers = nlohmann::json::array();
  for (BlockDevice* d = &top; d != nullptr; d = d->lower()) {
    PropertyList props;
    d->Properties(props);
    nlohmann::json layer = {{"kind", d->kind()},
                            {"description", d->Describe()},
                            {"geometry", GeometryJson(d->geometry())},
                            {"capabilities", CapabilitiesJson(d->capabilities())},
                            {"properties", PropertiesJson(props)}};
    if (options.stats) layer["stats"] = LayerStatsJson(*d);
    layers.push_back(std::move(layer));
  }
  return {{"spec", spec},
          {"geometry", GeometryJson(top.geometry())},
          {"capabilities", CapabilitiesJson(top.capabilities())},
          {"layers", std::move(layers)}};
}

std::string InfoJson(const std::string& spec, BlockDevice& top, const InfoOptions& options) {
  return InfoJsonValue(spec, top, options).dump(2);
}

std::string BackingChainInfoJson(const std::string& spec, BlockDevice& top) {
  nlohmann::json chain = nlohmann::json::array();
  for (const ChainImage& image : BackingChain(spec, top)) {
    chain.push_back(InfoJsonValue(image.spec, *image.device));
  }
  return chain.dump(2);
}

}  // namespace vstack
