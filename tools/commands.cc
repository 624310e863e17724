// The one place subcommands are registered.
#include "tools/command.h"

namespace vstack::cli {

void AddInfoCommand(CLI::App& app);
void AddLayersCommand(CLI::App& app);
void AddSpaceCommand(CLI::App& app);

const std::vector<CommandRegistration>& AllCommands() {
  static const std::vector<CommandRegistration> kCommands = {
      {"info", &AddInfoCommand},
      {"layers", &AddLayersCommand},
      {"space", &AddSpaceCommand},
  };
  return kCommands;
}

}  // namespace vstack::cli
