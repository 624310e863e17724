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
