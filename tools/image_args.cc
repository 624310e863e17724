#include "tools/image_args.h"

#include <algorithm>

#include "lib/registry.h"
#include "lib/spec.h"
#include "lib/suggest.h"

namespace vstack::cli {

std::string FormatName(const std::string& format) { return format == "vpc" ? "vhd" : format; }

std::vector<std::string> FormatChoices(bool creatable) {
  std::vector<std::string> formats = {"raw"};
  if (creatable) {
    formats = CreatableFormats();
  } else {
    for (const ComponentInfo* c : Registry::Global().All()) {
      if (c->probe) formats.push_back(c->name);
    }
  }
  if (std::find(formats.begin(), formats.end(), "vhd") != formats.end()) formats.push_back("vpc");
  return formats;
}

Result<std::string> ImageSpec(const std::string& target, const std::string& format) {
  if (format.empty()) return target;
  const std::string name = FormatName(format);
  if (IsStackSpec(target)) {
    return MakeError(Errc::kInvalidArgument, "-f " + format + " names the format of a file; '" +
                                                 target + "' is a stack spec, which says it");
  }
  const std::string file = FormatSpecPart(SpecPart{"file", target, {}});
  if (name == "raw") return file;
  const ComponentInfo* c = Registry::Global().Find(name);
  if (c == nullptr || !c->probe) {
    const std::vector<std::string> names = FormatChoices(false);
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    return MakeError(Errc::kInvalidArgument, "-f: unknown image format '" + format + "' (" + list +
                                                 ")" + DidYouMean(format, names));
  }
  return name + "+" + file;
}

bool IsCreateUsageError(const Error& e) {
  return e.code == make_error_code(Errc::kInvalidArgument) ||
         e.code == make_error_code(Errc::kBadSpec) || e.code == make_error_code(Errc::kNotFound);
}

void AddForceShareFlag(CLI::App* cmd, bool* force_share) {
  cmd->add_flag("-U,--force-share", *force_share,
                "open without the locks qemu honours, to read an image another process has "
                "open for writing (what it reads may be changing)");
}

}  // namespace vstack::cli
