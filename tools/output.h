// Shared output helpers for subcommands: the --output=text|json option, property text and the
// layers of a stack. (The aligned text tables are lib/text_table.h; the JSON forms of the
// contract's types are the library's: imagetools/info_json.h.) Text and JSON are always produced
// from the same values.
#ifndef VSTACK_TOOLS_OUTPUT_H_
#define VSTACK_TOOLS_OUTPUT_H_

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "lib/block_device.h"
#include "lib/property.h"
#include "lib/stats.h"
#include "lib/text_table.h"

namespace vstack::cli {

enum class OutputFormat { kText, kJson };

// Adds --output=text|json to `cmd`, storing into `format`.
void AddOutputOption(CLI::App* cmd, OutputFormat* format);

// "value" or "value (64 MiB)" for properties with unit "bytes".
std::string PropertyText(const Property& p);

// The devices of a stack, top first.
std::vector<BlockDevice*> StackChain(BlockDevice& top);

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_OUTPUT_H_
