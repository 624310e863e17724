// vstack: the command line. Subcommands are listed in commands.cc.
#include <cstdio>

#include "lib/version.h"
#include "tools/command.h"

namespace vstack::cli {

void Exit(int code) { throw CLI::RuntimeError(code); }

void Fail(const std::string& command, const std::string& message, int code) {
  std::fprintf(stderr, "vstack %s: %s\n", command.c_str(), message.c_str());
  Exit(code);
}

}  // namespace vstack::cli

int main(int argc, char** argv) {
  CLI::App app{"vstack: a virtual storage stack emulator. Build block-device stacks from spec "
               "strings such as dedup+zstd+vhd+file:/var/tmp/d.vhd, benchmark them side by side "
               "and measure their space savings.",
               "vstack"};
  app.set_version_flag("--version", std::string("vstack ") + vstack::Version());
  app.require_subcommand(1);
  app.footer("Stack specs: see `vstack layers` and docs/stack-spec.md.");
  for (const auto& c : vstack::cli::AllCommands()) c.add(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
