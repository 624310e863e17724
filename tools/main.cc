// vstack: the command line. Subcommands are listed in commands.cc.
#include <cstdio>
#include <new>

#include "lib/version.h"
#include "tools/command.h"
#include "tools/usage.h"

int main(int argc, char** argv) {
  CLI::App app{"vstack: a virtual storage stack emulator. Build block-device stacks from spec "
               "strings such as dedup+zstd+vhd+file:/var/tmp/d.vhd, benchmark them side by side "
               "and measure their space savings.",
               "vstack"};
  app.set_version_flag("--version", std::string("vstack ") + vstack::Version());
  app.require_subcommand(0, 1);
  for (const auto& c : vstack::cli::AllCommands()) c.add(app);
  const std::string exit_status =
      "Exit status: 0 success, 1 error, 2 usage error (unknown command or option, bad value). "
      "check: 0 clean, 1 the check failed or a usage error, 2 corrupt, 3 leaks only. compare: 0 "
      "identical, 1 different, 2 error. bench, sim, convert, space, commit and rebase: 130 when "
      "interrupted.";
  for (CLI::App* sub : app.get_subcommands({})) {
    const std::string own = sub->get_footer();
    sub->footer(own.empty() ? exit_status : own + "\n\n" + exit_status);
  }
  app.footer(
      "`vstack help COMMAND` (or `vstack COMMAND --help`) shows a command's options. Stack specs: "
      "see `vstack layers` and docs/stack-spec.md.\n\n" +
      exit_status);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return vstack::cli::ReportParseError(app, e);
  } catch (const std::bad_alloc&) {
    // An image whose tables need more memory than the process may have: a clear error, not
    // an abort (the limits of docs/layers/vhd.md keep this rare).
    const auto subs = app.get_subcommands();
    std::fprintf(stderr,
                 "vstack %s: out of memory: the image needs more memory than this "
                 "process may use (see `ulimit -v`)\n",
                 subs.empty() ? "" : subs.front()->get_name().c_str());
    return 1;
  }
  if (app.get_subcommands().empty()) {
    std::fprintf(stderr, "vstack: a command is required\nTry `vstack help` for usage.\n");
    return vstack::cli::kExitUsage;
  }
  return 0;
}
