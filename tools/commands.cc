// The one place subcommands are registered, and how a subcommand ends (command.h). Here, not in
// main.cc, so that tests linking the CLI's library get them too.
#include "tools/command.h"

#include <cstdio>

#include "tools/usage.h"

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
      {"serve", &AddServeCommand},
      {"help", &AddHelpCommand},
      {"completion", &AddCompletionCommand},
  };
  return kCommands;
}

void Exit(int code) { throw CLI::RuntimeError(code); }

void Fail(const std::string& command, const std::string& message, int code) {
  std::fprintf(stderr, "vstack %s: %s\n", command.c_str(), message.c_str());
  Exit(code);
}

void FailUsage(const std::string& command, const std::string& message) {
  Fail(command, message, UsageExitCode(command));
}

}  // namespace vstack::cli
