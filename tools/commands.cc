// The one place subcommands are registered.
#include "tools/command.h"

namespace vstack::cli {

void AddBenchCommand(CLI::App& app);
void AddInfoCommand(CLI::App& app);
void AddLayersCommand(CLI::App& app);
void AddCreateCommand(CLI::App& app);
void AddCheckCommand(CLI::App& app);
void AddConvertCommand(CLI::App& app);
void AddCompareCommand(CLI::App& app);
void AddMapCommand(CLI::App& app);
void AddCompactCommand(CLI::App& app);
void AddCommitCommand(CLI::App& app);
void AddRebaseCommand(CLI::App& app);
void AddSpaceCommand(CLI::App& app);
void AddSimCommand(CLI::App& app);
void AddServeCommand(CLI::App& app);
void AddHelpCommand(CLI::App& app);
void AddCompletionCommand(CLI::App& app);

const std::vector<CommandRegistration>& AllCommands() {
  static const std::vector<CommandRegistration> kCommands = {
      {"bench", &AddBenchCommand},
      {"info", &AddInfoCommand},
      {"layers", &AddLayersCommand},
      {"create", &AddCreateCommand},
      {"check", &AddCheckCommand},
      {"convert", &AddConvertCommand},
      {"compare", &AddCompareCommand},
      {"map", &AddMapCommand},
      {"compact", &AddCompactCommand},
      {"commit", &AddCommitCommand},
      {"rebase", &AddRebaseCommand},
      {"space", &AddSpaceCommand},
      {"sim", &AddSimCommand},
      {"serve", &AddServeCommand},
      {"help", &AddHelpCommand},
      {"completion", &AddCompletionCommand},
  };
  return kCommands;
}

}  // namespace vstack::cli
