#include "tools/usage.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "lib/suggest.h"

namespace vstack::cli {
namespace {

std::string Join(const std::vector<std::string>& words, const char* sep) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

// The subcommand being parsed when the error happened, or null.
CLI::App* ParsedSubcommand(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->parsed()) return sub;
  }
  return nullptr;
}

std::vector<std::string> SubcommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// The message for arguments nobody took: the first unknown option, else the arguments.
std::string ExtrasMessage(const CLI::App* cmd, const std::vector<std::string>& extras) {
  for (const std::string& x : extras) {
    if (x.size() < 2 || x[0] != '-') continue;
    const std::string name = x.substr(0, x.find('='));
    return "unknown option '" + name + "'" + DidYouMean(name, OptionNames(*cmd));
  }
  return (extras.size() == 1 ? "unexpected argument '" : "unexpected arguments '") +
         Join(extras, " ") + "'";
}

}  // namespace

int UsageExitCode(const std::string& command) {
  return command == "check" ? kExitError : kExitUsage;
}

// Every option made with Choices(), with its choices. Options live as long as the app, which
// is made once per process.
std::map<const CLI::Option*, std::vector<std::string>>& ChoicesTable() {
  static auto* table = new std::map<const CLI::Option*, std::vector<std::string>>();
  return *table;
}

CLI::Option* Choices(CLI::Option* option, const std::vector<std::string>& choices) {
  ChoicesTable()[option] = choices;
  const std::string list = Join(choices, "|");
  option->type_name(list);
  option->check(CLI::Validator(
      [choices, list](std::string& value) -> std::string {
        if (std::find(choices.begin(), choices.end(), value) != choices.end()) return "";
        return "'" + value + "' is not one of " + list + DidYouMean(value, choices);
      },
      ""));
  return option;
}

CLI::Option* WholeNumber(CLI::Option* option) {
  option->check(CLI::Validator(
      [](std::string& value) -> std::string {
        const bool digits = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
          return c >= '0' && c <= '9';
        });
        errno = 0;
        if (digits) (void)std::strtoull(value.c_str(), nullptr, 10);
        if (digits && errno != ERANGE) return "";
        return "'" + value + "' is not a whole number from 0 to 18446744073709551615";
      },
      ""));
  return option;
}

std::vector<std::string> OptionChoices(const CLI::Option* option) {
  auto it = ChoicesTable().find(option);
  return it == ChoicesTable().end() ? std::vector<std::string>() : it->second;
}

std::vector<std::string> OptionNames(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

int ReportParseError(CLI::App& app, const CLI::ParseError& e) {
  CLI::App* cmd = ParsedSubcommand(app);
  const bool help =
      dynamic_cast<const CLI::CallForHelp*>(&e) || dynamic_cast<const CLI::CallForAllHelp*>(&e);
  // `vstack frobnicate --help`: the help of no command; the unknown word is the error.
  const std::vector<std::string> extras = app.remaining(true);
  const bool unknown_command = cmd == nullptr && !extras.empty() && extras[0][0] != '-';
  if ((help && !unknown_command) || dynamic_cast<const CLI::CallForVersion*>(&e)) {
    return app.exit(e);
  }
  if (dynamic_cast<const CLI::RuntimeError*>(&e)) return e.get_exit_code();  // Exit(code)
  const std::string name = cmd ? cmd->get_name() : "";
  std::string message = e.what();
  if (help || dynamic_cast<const CLI::ExtrasError*>(&e)) {
    if (cmd != nullptr) {
      message = ExtrasMessage(cmd, extras);
    } else if (!extras.empty() && extras[0][0] != '-') {
      message = "unknown command '" + extras[0] + "'" + DidYouMean(extras[0], SubcommandNames(app));
    } else {
      message = ExtrasMessage(&app, extras);
    }
  }
  std::fprintf(stderr, "vstack%s%s: %s\nTry `vstack help%s%s` for usage.\n", cmd ? " " : "",
               name.c_str(), message.c_str(), cmd ? " " : "", name.c_str());
  return UsageExitCode(name);
}

}  // namespace vstack::cli
