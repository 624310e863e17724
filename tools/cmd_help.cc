// vstack help [COMMAND]: the same text as `vstack --help` or `vstack COMMAND --help`.
#include <fmt/format.h>

#include <cstdio>

#include "tools/command.h"
#include "tools/usage.h"

namespace vstack::cli {

void AddHelpCommand(CLI::App& app) {
  auto topic = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("help", "Show the options of vstack or of one command");
  cmd->add_option("command", *topic, "the command to explain");
  cmd->callback([&app, topic] {
    if (topic->empty()) {  // app.help() would show the selected subcommand's: this one
      fmt::print("{}",
                 app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal));
      return;
    }
    std::vector<std::string> names;
    for (CLI::App* sub : app.get_subcommands({})) {
      if (sub->get_name() == *topic) {
        fmt::print("{}", sub->help(app.get_name()));
        return;
      }
      names.push_back(sub->get_name());
    }
    // The commands are what to look at next, not `vstack help help`.
    std::fprintf(stderr,
                 "vstack help: unknown command '%s'%s\nTry `vstack help` for the commands.\n",
                 topic->c_str(), DidYouMean(*topic, names).c_str());
    Exit(kExitUsage);
  });
}

}  // namespace vstack::cli
