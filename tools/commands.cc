// The one place subcommands are registered.
#include "tools/command.h"

namespace vstack::cli {

void AddBenchCommand(CLI::App& app);
void AddInfoCommand(CLI::App& app);
void AddLayersCommand(CLI::App& app);

const std::vector<CommandRegistration>& AllCommands() {
  static const std::vector<CommandRegistration> kCommands = {
      {"bench", &AddBenchCommand},
      {"info", &AddInfoCommand},
      {"layers", &AddLayersCommand},
  };
  return kCommands;
}

}  // namespace vstack::cli
