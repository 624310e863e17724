// vstack commit CHILD: merges a differencing VHD into its parent, like qemu-img commit: every
// sector the child holds is written into the parent (formats/vhd/vhd_chain_tools.h). The
// child is left unchanged and still reads the same.
#include <fmt/format.h>

#include "formats/vhd/vhd_chain_tools.h"
#include "lib/size.h"
#include "tools/command.h"

namespace vstack::cli {

void AddCommitCommand(CLI::App& app) {
  auto child = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("commit", "Merge a differencing VHD into its parent (qemu-img commit)");
  cmd->add_option("child", *child, "the differencing image")->required();
  cmd->callback([child] {
    uint64_t bytes = 0;
    Status s = vhd::CommitImage(*child, &bytes);
    if (!s) Fail("commit", s.error().ToString());
    fmt::print("Image committed: {} ({} bytes) copied into the parent\n", FormatSize(bytes),
               bytes);
  });
}

}  // namespace vstack::cli
