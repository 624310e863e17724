// vstack rebase [-u] [-p] -b NEWPARENT CHILD: gives a differencing VHD a new parent, like
// qemu-img rebase (RebaseImage, imagetools/rebase.h). Safe mode copies into the child what
// would otherwise change; -u only rewrites the link.
#include <fmt/format.h>

#include "imagetools/rebase.h"
#include "lib/size.h"
#include "tools/command.h"
#include "tools/interrupt.h"
#include "tools/progress.h"
#include "tools/usage.h"

namespace vstack::cli {
namespace {

struct RebaseArgs {
  std::string child;
  std::string backing;
  RebaseOptions options;
  bool progress = false;
};

}  // namespace

void AddRebaseCommand(CLI::App& app) {
  auto args = std::make_shared<RebaseArgs>();
  CLI::App* cmd = app.add_subcommand(
      "rebase", "Give a differencing VHD a new parent (qemu-img rebase)");
  cmd->add_option("-b,--backing", args->backing,
                  "the new parent (relative to CHILD's directory)")
      ->required();
  // A usage error (2) like create's -F: checked here, before anything is opened.
  Choices(cmd->add_option("-F,--backing-format", args->options.backing_format,
                          "the new parent's format: vhd (vpc is qemu's name for it)"),
          {"vhd", "vpc"});
  cmd->add_flag("-u,--unsafe", args->options.unsafe,
                "only rewrite the link; the child's content may change");
  cmd->add_flag("-p,--progress", args->progress, "show a progress bar (safe mode)");
  cmd->add_option("child", args->child, "the differencing image")->required();
  cmd->callback([args] {
    std::unique_ptr<Progress> bar;
    RebaseOptions options = args->options;
    options.progress = [&](uint64_t done, uint64_t total) {
      if (!bar) bar = std::make_unique<Progress>("rebase: compare", total, args->progress);
      bar->Set(done);
    };
    InterruptScope interrupt;  // Ctrl-C: the copy stops and the child keeps its old parent
    options.stop = &InterruptScope::stop();
    Result<uint64_t> bytes = RebaseImage(args->child, args->backing, options);
    bar.reset();
    if (!bytes && bytes.error().code == make_error_code(Errc::kCancelled)) {
      Fail("rebase", bytes.error(), 130);
    }
    if (!bytes) Fail("rebase", bytes.error());
    fmt::print("Rebased '{}' onto '{}'{}\n", args->child, args->backing,
               options.unsafe ? " (unsafe: link only)"
                              : fmt::format("; {} ({} bytes) copied into the child",
                                            FormatSize(*bytes), *bytes));
  });
}

}  // namespace vstack::cli
