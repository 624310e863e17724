#include "tools/usage.h"

#include <algorithm>
#include <cstdio>

namespace vstack::cli {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbours each cost 1.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

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

std::string NearestMatch(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  std::vector<std::string> prefixed;
  for (const std::string& c : candidates) {
    if (c.size() > word.size() && c.compare(0, word.size(), word) == 0) prefixed.push_back(c);
    const size_t d = EditDistance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  // A typo: at most one edit in four characters (and at least one allowed).
  const size_t allowed = std::max<size_t>(1, word.size() / 4);
  if (best_distance <= allowed) return best;
  if (prefixed.size() == 1 && word.size() >= 2) return prefixed[0];
  return "";
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string m = NearestMatch(word, candidates);
  return m.empty() ? "" : "; did you mean `" + m + "`?";
}

CLI::Option* Choices(CLI::Option* option, const std::vector<std::string>& choices) {
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

std::vector<std::string> OptionNames(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

int ReportParseError(CLI::App& app, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::CallForHelp*>(&e) || dynamic_cast<const CLI::CallForAllHelp*>(&e) ||
      dynamic_cast<const CLI::CallForVersion*>(&e)) {
    return app.exit(e);
  }
  if (dynamic_cast<const CLI::RuntimeError*>(&e)) return e.get_exit_code();  // Exit(code)
  CLI::App* cmd = ParsedSubcommand(app);
  const std::string name = cmd ? cmd->get_name() : "";
  std::string message = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    const std::vector<std::string> extras = app.remaining(true);
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
