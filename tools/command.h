// How a `vstack` subcommand plugs into the CLI. Each subcommand lives in its own cmd_<name>.cc
// with one function that adds it to the app; commands.cc lists them all in one place.
#ifndef VSTACK_TOOLS_COMMAND_H_
#define VSTACK_TOOLS_COMMAND_H_

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "lib/errors.h"

namespace vstack::cli {

struct CommandRegistration {
  const char* name;
  // Adds the subcommand (options, help, callback) to `app`.
  void (*add)(CLI::App& app);
};

// Every subcommand, in the order `vstack --help` lists them.
const std::vector<CommandRegistration>& AllCommands();

// Ends a subcommand's callback with exit status `code` (0 = success). Messages go to stderr
// first; CLI11 turns this into the process exit status.
[[noreturn]] void Exit(int code);
// Prints "vstack <command>: <message>" to stderr and exits with `code`.
[[noreturn]] void Fail(const std::string& command, const std::string& message, int code = 1);
// Fail() for a bad command line (a bad flag or value): prints the message and a line pointing
// to `vstack help COMMAND`, and exits with UsageExitCode(command), 2 (tools/usage.h has the
// policy).
[[noreturn]] void FailUsage(const std::string& command, const std::string& message);
// Fail() with a library error: FailUsage() for a bad stack spec (Errc::kBadSpec: an unknown
// layer or option, a bad option value), else Fail() with `code`.
[[noreturn]] void Fail(const std::string& command, const Error& error, int code = 1);

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_COMMAND_H_
