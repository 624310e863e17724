#include "tools/nbd/serve_report.h"

#include <fmt/format.h>

#include "imagetools/info_json.h"
#include "lib/size.h"
#include "tools/output.h"

namespace vstack::nbd {
namespace {

std::string OpCell(const LayerStats& s, Op op, bool with_bytes) {
  const OpCounts& c = s.of(op);
  if (!with_bytes || c.ops == 0) return std::to_string(c.ops);
  return fmt::format("{} ({})", c.ops, FormatSize(c.bytes));
}

}  // namespace

std::string ServeSummaryText(const std::string& spec, BlockDevice& top, double seconds) {
  TextTable table({"layer", "reads", "writes", "flushes", "trims", "zeroes", "errors"},
                       {false, true, true, true, true, true, true});
  int level = 0;
  for (BlockDevice* d : cli::StackChain(top)) {
    const LayerStats s = d->Stats();
    uint64_t errors = 0;
    for (const OpCounts& c : s.op) errors += c.errors;
    table.AddRow({fmt::format("[{}] {}", level++, d->kind()), OpCell(s, Op::kRead, true),
                  OpCell(s, Op::kWrite, true), OpCell(s, Op::kFlush, false),
                  OpCell(s, Op::kDiscard, true), OpCell(s, Op::kWriteZeroes, true),
                  std::to_string(errors)});
  }
  return fmt::format("vstack serve: stopped serving {} after {:.1f} s; requests per layer:\n{}",
                     spec, seconds, table.Render("  "));
}

nlohmann::json ServeSummaryJson(const std::string& spec, BlockDevice& top, double seconds) {
  nlohmann::json layers = nlohmann::json::array();
  for (BlockDevice* d : cli::StackChain(top)) {
    layers.push_back(
        {{"kind", d->kind()}, {"description", d->Describe()}, {"stats", LayerStatsJson(*d)}});
  }
  return {{"spec", spec}, {"seconds", seconds}, {"layers", layers}};
}

}  // namespace vstack::nbd
