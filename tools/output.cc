#include "tools/output.h"

#include <fmt/format.h>

#include "lib/size.h"
#include "tools/usage.h"

namespace vstack::cli {

void AddOutputOption(CLI::App* cmd, OutputFormat* format) {
  Choices(cmd->add_option_function<std::string>(
              "--output",
              [format](const std::string& v) {
                *format = v == "json" ? OutputFormat::kJson : OutputFormat::kText;
              },
              "output format (default: text)"),
          {"text", "json"});
}

nlohmann::json ToJson(const PropertyValue& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

nlohmann::json ToJson(const PropertyList& props) {
  nlohmann::json j = nlohmann::json::object();
  for (const Property& p : props) j[p.key] = ToJson(p.value);
  return j;
}

nlohmann::json ToJson(const Geometry& g) {
  return {{"size_bytes", g.size_bytes},         {"logical_block", g.logical_block},
          {"physical_block", g.physical_block}, {"mem_alignment", g.mem_alignment},
          {"max_transfer", g.max_transfer},     {"optimal_transfer", g.optimal_transfer}};
}

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

nlohmann::json ToJson(const LayerStats& stats) {
  nlohmann::json ops = nlohmann::json::object();
  for (int i = 0; i < kOpCount; ++i) {
    const auto& h = stats.latency[i];
    ops[std::string(OpName(static_cast<Op>(i)))] = {
        {"ops", stats.op[i].ops},
        {"bytes", stats.op[i].bytes},
        {"errors", stats.op[i].errors},
        {"latency_ns", {{"mean", h.mean()}, {"p50", h.Percentile(50)}, {"p99", h.Percentile(99)},
                        {"max", h.max()}}}};
  }
  nlohmann::json counters = nlohmann::json::object();
  for (size_t i = 0; i < stats.counter_names.size(); ++i) {
    counters[stats.counter_names[i]] = stats.counters[i];
  }
  return {{"ops", ops}, {"in_flight", stats.in_flight}, {"counters", counters}};
}

std::string PropertyText(const Property& p) {
  std::string s = PropertyValueToString(p.value);
  if (p.unit == "bytes") {
    if (const uint64_t* v = std::get_if<uint64_t>(&p.value); v && *v >= 1024) {
      s += " (" + FormatSize(*v) + ")";
    }
  } else if (!p.unit.empty()) {
    s += " " + p.unit;
  }
  return s;
}

std::vector<BlockDevice*> StackChain(BlockDevice& top) {
  std::vector<BlockDevice*> chain;
  for (BlockDevice* d = &top; d != nullptr; d = d->lower()) chain.push_back(d);
  return chain;
}

}  // namespace vstack::cli
