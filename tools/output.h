// Shared output helpers for subcommands: aligned text tables, the --output=text|json option,
// property text and the layers of a stack. (The JSON forms of the contract's types are the
// library's: imagetools/info_json.h.) Text and JSON are always produced from the same values.
#ifndef VSTACK_TOOLS_OUTPUT_H_
#define VSTACK_TOOLS_OUTPUT_H_

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "lib/block_device.h"
#include "lib/property.h"
#include "lib/stats.h"

namespace vstack::cli {

enum class OutputFormat { kText, kJson };

// Adds --output=text|json to `cmd`, storing into `format`.
void AddOutputOption(CLI::App* cmd, OutputFormat* format);

// A text table with a header row; columns are left-aligned unless marked numeric (right).
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, std::vector<bool> numeric = {});
  void AddRow(std::vector<std::string> cells);
  void AddRule();  // a dashed separator row
  std::string Render(const std::string& indent = "") const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> numeric_;
  std::vector<std::vector<std::string>> rows_;  // empty row = rule
};

// "value" or "value (64 MiB)" for properties with unit "bytes".
std::string PropertyText(const Property& p);

// The devices of a stack, top first.
std::vector<BlockDevice*> StackChain(BlockDevice& top);

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_OUTPUT_H_
