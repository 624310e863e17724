// vstack convert [-p] [-f FMT] [-O raw|vhd|vhdx|vpc] [-o OPTIONS] [--overwrite] SRC DST: copies the
// virtual disk of SRC into a new image DST, like qemu-img convert. SRC is a file (its format
// probed, or named by -f) or a stack spec; DST is a new file of format -O (default raw), created
// with -o OPTIONS (an existing file only with --overwrite), or an existing stack spec at least
// as large as SRC. The copy is the library's ConvertImage (imagetools/convert.h); this file
// parses the flags and draws the progress bar.
#include "imagetools/convert.h"
#include "lib/registry.h"
#include "tools/command.h"
#include "tools/interrupt.h"
#include "tools/image_args.h"
#include "tools/progress.h"
#include "tools/usage.h"

namespace vstack::cli {
namespace {

struct ConvertArgs {
  bool progress = false;
  bool overwrite = false;
  bool force_share = false;
  std::string src_format;
  std::string format;
  std::string options;
  std::string src;
  std::string dst;
};

}  // namespace

void AddConvertCommand(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand(
      "convert", "Copy an image into a new one of another format (qemu-img convert style)");
  cmd->add_flag("-p,--progress", args->progress, "show a progress bar");
  Choices(cmd->add_option("-f,--format", args->src_format,
                          "format of SRC (default: probed from the file; vpc is qemu's name for "
                          "vhd)"),
          FormatChoices(/*creatable=*/false));
  Choices(cmd->add_option("-O,--output-format", args->format,
                          "format of DST (default raw; vpc is qemu's name for vhd)"),
          FormatChoices(/*creatable=*/true));
  cmd->add_option("-o,--options", args->options, "create options for DST, e.g. subformat=fixed");
  cmd->add_flag("--overwrite", args->overwrite, "replace DST if it is an existing file");
  AddForceShareFlag(cmd, &args->force_share);
  cmd->add_option("src", args->src, "source image file or stack spec")->required();
  cmd->add_option("dst", args->dst, "destination: a new file, or an existing stack spec")
      ->required();
  cmd->callback([args] {
    auto src_spec = ImageSpec(args->src, args->src_format);
    if (!src_spec) FailUsage("convert", src_spec.error().message);
    OpenOptions ro;
    ro.read_only = true;
    ro.force_share = args->force_share;  // the source only
    auto src = OpenImage(*src_spec, ro);
    if (!src) Fail("convert", src.error());
    const bool dst_is_spec = IsStackSpec(args->dst);
    if (dst_is_spec && (!args->format.empty() || !args->options.empty() || args->overwrite)) {
      FailUsage("convert", "-O, -o and --overwrite make a new file; '" + args->dst +
                               "' is a stack spec, which is written as it is");
    }
    Progress bar("convert", (*src)->geometry().size_bytes, args->progress);
    ConvertOptions options;
    options.format = FormatName(args->format);
    options.create_options = args->options;
    options.overwrite = args->overwrite;
    options.progress = [&bar](uint64_t done, uint64_t) { bar.Set(done); };
    InterruptScope interrupt;  // Ctrl-C: the copy stops, and a new file is removed
    options.stop = &InterruptScope::stop();
    auto copied = ConvertImage(**src, args->dst, options);
    bar.Finish();
    if (!copied && copied.error().code == make_error_code(Errc::kCancelled)) {
      Fail("convert", copied.error().message +
                          (dst_is_spec ? "; the destination holds what was copied until then"
                                       : "; the new file was removed"),
           130);
    }
    if (!copied && !dst_is_spec && IsCreateUsageError(copied.error())) {
      FailUsage("convert", copied.error().message);  // an unknown format or -o option
    }
    if (!copied) Fail("convert", copied.error());
  });
}

}  // namespace vstack::cli
