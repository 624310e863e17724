// Shared output helpers for subcommands: the --output=text|json option and JSON forms of the
// contract's types (the aligned text tables are lib/text_table.h). Text and JSON are always
// produced from the same values.
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

nlohmann::json ToJson(const PropertyValue& v);
nlohmann::json ToJson(const PropertyList& props);
nlohmann::json ToJson(const Geometry& g);
nlohmann::json CapabilitiesJson(Capabilities caps);
nlohmann::json ToJson(const LayerStats& stats);

// "value" or "value (64 MiB)" for properties with unit "bytes".
std::string PropertyText(const Property& p);

// The devices of a stack, top first.
std::vector<BlockDevice*> StackChain(BlockDevice& top);

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_OUTPUT_H_
