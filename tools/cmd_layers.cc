// vstack layers [--output=json]: the registered backends and layers with their options, i.e.
// everything a stack spec may name.
#include <fmt/format.h>

#include "lib/registry.h"
#include "tools/command.h"
#include "tools/output.h"

namespace vstack::cli {

void AddLayersCommand(CLI::App& app) {
  auto output = std::make_shared<OutputFormat>(OutputFormat::kText);
  CLI::App* cmd = app.add_subcommand("layers", "List the backends and layers a stack spec may use");
  AddOutputOption(cmd, output.get());
  cmd->callback([output] {
    const auto all = Registry::Global().All();
    if (*output == OutputFormat::kJson) {
      nlohmann::json j = nlohmann::json::array();
      for (const ComponentInfo* c : all) {
        nlohmann::json opts = nlohmann::json::array();
        for (const OptionInfo& o : c->options) {
          opts.push_back({{"name", o.name}, {"help", o.help}, {"default", o.default_value}});
        }
        j.push_back({{"name", c->name},
                     {"kind", c->kind == ComponentKind::kBackend ? "backend" : "layer"},
                     {"summary", c->summary},
                     {"positional", c->positional},
                     {"options", opts}});
      }
      fmt::print("{}\n", j.dump(2));
      return;
    }
    fmt::print("A stack spec lists layers first and the backend last, joined by '+':\n"
               "  dedup+zstd:level=1+vhd+file:/var/tmp/d.vhd\n\n");
    for (ComponentKind kind : {ComponentKind::kBackend, ComponentKind::kLayer}) {
      fmt::print("{}:\n", kind == ComponentKind::kBackend ? "Backends" : "Layers");
      for (const ComponentInfo* c : all) {
        if (c->kind != kind) continue;
        const std::string usage =
            c->positional.empty() ? c->name : c->name + ":" + c->positional;
        fmt::print("  {:<20} {}\n", usage, c->summary);
        for (const OptionInfo& o : c->options) {
          fmt::print("      {:<16} {}{}\n", o.name + "=", o.help,
                     o.default_value.empty() ? "" : " [" + o.default_value + "]");
        }
      }
      fmt::print("\n");
    }
  });
}

}  // namespace vstack::cli
