// How `vstack` treats a bad command line: one exit-code policy for every subcommand, messages
// that name the command and suggest the nearest valid word, and option values checked against
// a fixed list of choices (shown in --help as "text|json").
//
// Exit status policy (also in `vstack --help` and docs/cli.md):
//   0 success, 1 error, 2 usage error (unknown command or option, bad flag or value).
//   check keeps qemu-img's codes: 0 clean, 1 the check failed (and usage errors), 2 corrupt,
//   3 leaks only. compare keeps qemu-img's: 0 identical, 1 different, 2 error (of any kind).
//   bench, sim, convert, space, commit and rebase exit 130 when interrupted (sim: unless a run
//   failed, 1).
#ifndef VSTACK_TOOLS_USAGE_H_
#define VSTACK_TOOLS_USAGE_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "lib/suggest.h"  // NearestMatch, DidYouMean

namespace vstack::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

// The exit status of a usage error in `command` ("" for vstack itself): kExitUsage, except for
// check, whose 2 means "corrupt".
int UsageExitCode(const std::string& command);

// Restricts an option to `choices`: --help shows "NAME a|b|c", a bad value says
// "--NAME: 'x' is not one of a|b|c" (with a suggestion when one is close).
CLI::Option* Choices(CLI::Option* option, const std::vector<std::string>& choices);
// Restricts an unsigned option to a whole number that fits in 64 bits: CLI11 took "-1" as
// 2^64 - 1 and a number beyond 2^64 as some other (`sim --seeds -1` ran for ever).
CLI::Option* WholeNumber(CLI::Option* option);
// The choices Choices() gave `option` (for completion), or none.
std::vector<std::string> OptionChoices(const CLI::Option* option);

// Turns a CLI11 parse error of `app` into vstack's message ("vstack CMD: ..." on stderr) and
// exit status. --help and --version print to stdout and return 0.
int ReportParseError(CLI::App& app, const CLI::ParseError& e);

// Every long and short option name of `cmd` ("--stack", "-p"), for suggestions and completion.
std::vector<std::string> OptionNames(const CLI::App& cmd);

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_USAGE_H_
