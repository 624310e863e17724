// vstack rebase [-u] -b NEWPARENT CHILD: gives a differencing VHD a new parent, like qemu-img
// rebase. Safe mode copies into the child what would otherwise change; -u only rewrites the
// link (formats/vhd/vhd_chain_tools.h).
#include <fmt/format.h>

#include "formats/vhd/vhd_chain_tools.h"
#include "lib/size.h"
#include "tools/command.h"

namespace vstack::cli {
namespace {

struct RebaseArgs {
  std::string child;
  std::string backing;
  std::string backing_format = "vhd";
  bool unsafe = false;
};

}  // namespace

void AddRebaseCommand(CLI::App& app) {
  auto args = std::make_shared<RebaseArgs>();
  CLI::App* cmd = app.add_subcommand(
      "rebase", "Give a differencing VHD a new parent (qemu-img rebase)");
  cmd->add_option("-b,--backing", args->backing,
                  "the new parent (relative to CHILD's directory)")
      ->required();
  cmd->add_option("-F,--backing-format", args->backing_format, "the new parent's format: vhd");
  cmd->add_flag("-u,--unsafe", args->unsafe,
                "only rewrite the link; the child's content may change");
  cmd->add_option("child", args->child, "the differencing image")->required();
  cmd->callback([args] {
    if (args->backing_format != "vhd" && args->backing_format != "vpc") {
      Fail("rebase", "a VHD's parent must be a VHD, not '" + args->backing_format + "'");
    }
    uint64_t bytes = 0;
    Status s = vhd::RebaseImage(args->child, args->backing, args->unsafe, &bytes);
    if (!s) Fail("rebase", s.error().ToString());
    fmt::print("Rebased '{}' onto '{}'{}\n", args->child, args->backing,
               args->unsafe ? " (unsafe: link only)"
                            : fmt::format("; {} ({} bytes) copied into the child",
                                          FormatSize(bytes), bytes));
  });
}

}  // namespace vstack::cli
