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

void Exit(int code) { throw CLI::RuntimeError(code); }

void Fail(const std::string& command, const std::string& message, int code) {
  std::fprintf(stderr, "vstack %s: %s\n", command.c_str(), message.c_str());
  Exit(code);
}

void FailUsage(const std::string& command, const std::string& message) {
  const std::string topic = command.substr(0, command.find(' '));  // "space merge": space
  std::fprintf(stderr, "vstack %s: %s\nTry `vstack help %s` for usage.\n", command.c_str(),
               message.c_str(), topic.c_str());
  Exit(UsageExitCode(command));
}

void Fail(const std::string& command, const Error& error, int code) {
  if (error.code == make_error_code(Errc::kBadSpec)) FailUsage(command, error.ToString());
  Fail(command, error.ToString(), code);
}

}  // namespace vstack::cli
