// vstack commit [-p] CHILD: merges a differencing VHD into its parent, like qemu-img commit:
// every sector the child holds is written into the parent (CommitImage, imagetools/commit.h).
// The child is left unchanged and still reads the same.
#include <fmt/format.h>

#include "imagetools/commit.h"
#include "lib/size.h"
#include "tools/command.h"
#include "tools/interrupt.h"
#include "tools/progress.h"

namespace vstack::cli {

void AddCommitCommand(CLI::App& app) {
  auto child = std::make_shared<std::string>();
  auto progress = std::make_shared<bool>(false);
  CLI::App* cmd =
      app.add_subcommand("commit", "Merge a differencing VHD into its parent (qemu-img commit)");
  cmd->add_flag("-p,--progress", *progress, "show a progress bar");
  cmd->add_option("child", *child, "the differencing image")->required();
  cmd->callback([child, progress] {
    std::unique_ptr<Progress> bar;
    CommitOptions options;
    options.progress = [&](uint64_t done, uint64_t total) {
      if (!bar) bar = std::make_unique<Progress>("commit", total, *progress);
      bar->Set(done);
    };
    InterruptScope interrupt;  // Ctrl-C: the copy stops and the parent is closed cleanly
    options.stop = &InterruptScope::stop();
    Result<uint64_t> bytes = CommitImage(*child, options);
    bar.reset();
    if (!bytes && bytes.error().code == make_error_code(Errc::kCancelled)) {
      Fail("commit", bytes.error(), 130);
    }
    if (!bytes) Fail("commit", bytes.error());
    fmt::print("Image committed: {} ({} bytes) copied into the parent\n", FormatSize(*bytes),
               *bytes);
  });
}

}  // namespace vstack::cli
