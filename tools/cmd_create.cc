// vstack create -f FORMAT [-o OPTIONS] [--overwrite] FILE SIZE: a new image, like qemu-img
// create. FORMAT is raw or any format with a create hook (vhd or qemu's name vpc, vhdx); `-o help`
// lists the format's options. An existing FILE is refused unless --overwrite is given.
#include <fmt/format.h>

#include "imagetools/new_image_file.h"
#include "lib/registry.h"
#include "lib/size.h"
#include "tools/command.h"
#include "tools/image_args.h"
#include "tools/usage.h"

namespace vstack::cli {
namespace {

struct CreateArgs {
  std::string format = "raw";
  std::string options;
  std::string file;
  std::string size;
  std::string backing;         // -b: a differencing image over this parent
  std::string backing_format;  // -F
  bool overwrite = false;
};

// A value inside "k=v,k=v": '+', ',', ':' and '\\' escaped (docs/stack-spec.md).
std::string EscapeOption(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '+' || c == ',' || c == ':' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

void PrintOptions(const std::string& format) {
  const ComponentInfo* c = Registry::Global().Find(format);
  if (format == "raw") {
    fmt::print("format 'raw' has no create options\n");
    return;
  }
  if (c == nullptr || !c->create) FailUsage("create", "unknown image format '" + format + "'");
  fmt::print("Create options for format '{}':\n", format);
  for (const OptionInfo& o : c->create_options) {
    fmt::print("  {:<16} {}{}\n", o.name + "=", o.help,
               o.default_value.empty() ? "" : " [" + o.default_value + "]");
  }
}

}  // namespace

void AddCreateCommand(CLI::App& app) {
  auto args = std::make_shared<CreateArgs>();
  CLI::App* cmd = app.add_subcommand("create", "Create an image file (qemu-img create style)");
  Choices(cmd->add_option("-f,--format", args->format,
                          "image format (vpc is qemu's name for vhd); default raw"),
          FormatChoices(/*creatable=*/true));
  cmd->add_option(
      "-o,--options", args->options,
      "format options k=v,k=v (e.g. subformat=dynamic,block_size=2M); -o help lists them");
  cmd->add_option("-b,--backing", args->backing,
                  "a differencing image over this parent (relative to FILE's directory); "
                  "SIZE defaults to the parent's");
  cmd->add_option("-F,--backing-format", args->backing_format, "the parent's format: vhd");
  cmd->add_flag("--overwrite", args->overwrite, "replace FILE if it exists (refused otherwise)");
  cmd->add_option("file", args->file, "the image file to create");
  cmd->add_option("size", args->size, "virtual size, e.g. 10G, 512M, 1000");
  cmd->callback([args] {
    const std::string format = FormatName(args->format);
    if (args->options == "help") {
      PrintOptions(format);
      return;
    }
    if (args->file.empty()) FailUsage("create", "missing FILE and SIZE (e.g. disk.vhd 10G)");
    if (!args->backing.empty()) {
      std::string with_backing;  // the formats whose images can have a parent
      bool takes_backing = false;
      for (const ComponentInfo* c : Registry::Global().All()) {
        for (const OptionInfo& o : c->create_options) {
          if (o.name != "backing_file") continue;
          with_backing += (with_backing.empty() ? "" : ", ") + c->name;
          takes_backing = takes_backing || c->name == format;
        }
      }
      if (!takes_backing) {
        FailUsage("create", "-b: format '" + format +
                                "' has no differencing images (formats "
                                "with a backing file: " +
                                with_backing + ")");
      }
      args->options += std::string(args->options.empty() ? "" : ",") +
                       "backing_file=" + EscapeOption(args->backing) +
                       (args->backing_format.empty() ? "" : ",backing_fmt=" + args->backing_format);
      if (args->size.empty()) args->size = "0";
    }
    if (args->size.empty()) FailUsage("create", "missing SIZE (e.g. 10G)");
    auto size = ParseSize(args->size);
    if (!size) FailUsage("create", "SIZE: " + size.error().message);
    auto file = NewImageFile::Create(args->file, format, *size, args->options, args->overwrite);
    if (!file && IsCreateUsageError(file.error())) {
      FailUsage("create", file.error().message);  // an unknown format or -o option
    }
    if (!file) Fail("create", file.error());
    const uint64_t actual = file->device().geometry().size_bytes;
    if (Status c = file->Commit(); !c) Fail("create", c.error());
    fmt::print("Created '{}': format {}, virtual size {} ({} bytes){}\n", args->file, format,
               FormatSize(actual), actual,
               actual != *size && *size != 0 ? fmt::format(", {} requested", *size) : "");
  });
}

}  // namespace vstack::cli
