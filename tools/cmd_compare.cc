// vstack compare [-s] [-f FMT] [-F FMT] A B: 0 if the two virtual disks hold the same content, 1
// if they differ, 2 on an error of any kind, usage errors included (qemu-img compare). A and B
// are files (their formats probed, or named by -f and -F) or stack specs. When the sizes
// differ, the extra part of the larger one must read as zeros, and a warning says so; with -s
// (strict) different sizes alone make the images differ. Ranges both report as zero
// (MapExtents) are not read.
//
// The comparison is the library's CompareImages (imagetools/compare.h); this file parses the
// flags and prints qemu-img's messages.
#include <fmt/format.h>

#include "imagetools/compare.h"
#include "lib/registry.h"
#include "tools/command.h"
#include "tools/image_args.h"
#include "tools/usage.h"

namespace vstack::cli {

struct CompareArgs {
  std::string a, b, a_format, b_format;
  bool strict = false;
  bool force_share = false;
};

void AddCompareCommand(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Compare two images' content (exit 0 identical, 1 different, 2 error)");
  cmd->add_flag("-s,--strict", args->strict, "images of different sizes differ (exit 1)");
  Choices(cmd->add_option("-f", args->a_format, "format of A (default: probed)"),
          FormatChoices(/*creatable=*/false));
  Choices(cmd->add_option("-F", args->b_format, "format of B (default: probed)"),
          FormatChoices(/*creatable=*/false));
  AddForceShareFlag(cmd, &args->force_share);
  cmd->add_option("a", args->a, "first image file or stack spec")->required();
  cmd->add_option("b", args->b, "second image file or stack spec")->required();
  cmd->callback([args] {
    auto a_spec = ImageSpec(args->a, args->a_format);
    if (!a_spec) FailUsage("compare", a_spec.error().message);
    auto b_spec = ImageSpec(args->b, args->b_format);
    if (!b_spec) FailUsage("compare", b_spec.error().message);
    OpenOptions ro;
    ro.read_only = true;
    ro.force_share = args->force_share;
    auto a = OpenImage(*a_spec, ro);
    if (!a) Fail("compare", a.error(), 2);
    auto b = OpenImage(*b_spec, ro);
    if (!b) Fail("compare", b.error(), 2);
    CompareOptions options;
    options.strict = args->strict;
    auto c = CompareImages(**a, **b, options);
    if (c && c->size_mismatch()) {
      fmt::print("{}: Image size mismatch! ({} vs {} bytes)\n",
                 args->strict ? "Strict mode" : "Warning", c->size_a, c->size_b);
    }
    if (!c) Fail("compare", c.error(), 2);
    if (c->first_difference) fmt::print("Content mismatch at offset {}!\n", *c->first_difference);
    if (!c->identical) Exit(1);
    fmt::print("Images are identical.\n");
  });
}

}  // namespace vstack::cli
