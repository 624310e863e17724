#include "tools/image_args.h"

#include "lib/registry.h"
#include "lib/spec.h"

namespace vstack::cli {

std::string FormatName(const std::string& format) { return format == "vpc" ? "vhd" : format; }

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
    return MakeError(Errc::kInvalidArgument,
                     "-f: unknown image format '" + format + "' (raw, vhd or vpc)");
  }
  return name + "+" + file;
}

bool IsCreateUsageError(const Error& e) {
  return e.code == make_error_code(Errc::kInvalidArgument) ||
         e.code == make_error_code(Errc::kBadSpec) || e.code == make_error_code(Errc::kNotFound);
}

}  // namespace vstack::cli
