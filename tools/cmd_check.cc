// vstack check [-r leaks|all] [--output=json] SPEC|FILE: verifies every layer's metadata, top
// to bottom (BlockDevice::Check), like qemu-img check. Exit status: 0 clean, 2 corruption,
// 3 leaked space only, 1 the check itself failed.
//
// The check is the library's CheckImage (imagetools/check.h): the stack is opened with
// OpenOptions::for_check, so layers accept (and report) metadata a normal open refuses;
// read-only unless -r is given. An image too damaged to open even so counts as corrupt: its
// open error is reported and the status is 2. This file parses the flags and prints (the JSON
// document is the library's CheckJson).
#include <fmt/format.h>

#include "imagetools/check.h"
#include "tools/command.h"
#include "tools/image_args.h"
#include "tools/output.h"
#include "tools/usage.h"

namespace vstack::cli {
namespace {

struct CheckArgs {
  std::string target;
  std::string repair;
  OutputFormat output = OutputFormat::kText;
  bool force_share = false;
};

void Print(const ImageCheck& check, OutputFormat output) {
  const uint64_t corruptions = check.corruptions(), leaks = check.leaks(),
                 repaired = check.repaired();
  if (output == OutputFormat::kJson) {
    fmt::print("{}\n", CheckJson(check));
    return;
  }
  if (!check.open_error.empty()) {
    fmt::print("ERROR cannot open the image: {}\n", check.open_error);
  }
  for (const LayerCheck& l : check.layers) {
    for (const std::string& m : l.result.messages) fmt::print("[{}] {}\n", l.kind, m);
  }
  if (repaired > 0) fmt::print("{} problem(s) repaired.\n", repaired);
  if (corruptions > 0) {
    fmt::print(
        "{} error(s) found on the image: data may be corrupt, or further writes may "
        "corrupt it.\n",
        corruptions);
  }
  if (leaks > 0) {
    fmt::print("{} leak(s) found on the image: wasted space, but no harm to data.\n", leaks);
  }
  if (corruptions == 0 && leaks == 0) fmt::print("No errors were found on the image.\n");
}

}  // namespace

void AddCheckCommand(CLI::App& app) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* cmd = app.add_subcommand(
      "check", "Check every layer's metadata (exit 0 clean, 2 corrupt, 3 leaks only)");
  Choices(cmd->add_option("-r,--repair", args->repair,
                          "repair: leaks (reclaim leaked space) or all (also fix what is safe)"),
          {"leaks", "all"});
  AddForceShareFlag(cmd, &args->force_share);
  cmd->add_option("target", args->target, "image file or stack spec")->required();
  AddOutputOption(cmd, &args->output);
  cmd->callback([args] {
    const CheckMode mode = args->repair.empty()      ? CheckMode::kReadOnly
                           : args->repair == "leaks" ? CheckMode::kRepairLeaks
                                                     : CheckMode::kRepairAll;
    auto check = CheckImage(args->target, mode, {}, args->force_share);
    if (!check) Fail("check", check.error());
    Print(*check, args->output);
    if (check->exit_code() != 0) Exit(check->exit_code());
  });
}

}  // namespace vstack::cli
