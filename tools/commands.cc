// The one place subcommands are registered.
#include "tools/command.h"

namespace vstack::cli {

void AddInfoCommand(CLI::App& app);
void AddLayersCommand(CLI::App& app);
void AddServeCommand(CLI::App& app);

const std::vector<CommandRegistration>& AllCommands() {
  static const std::vector<CommandRegistration> kCommands = {
      {"info", &AddInfoCommand},
      {"layers", &AddLayersCommand},
      {"serve", &AddServeCommand},
  };
  return kCommands;
}

}  // namespace vstack::cli
