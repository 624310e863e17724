#include "tools/image_args.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
         e.code == make_error_code(Errc::kNotFound);
}

Result<Destination> Destination::Claim(const std::string& path, bool overwrite) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Destination(path, "");
  if (!overwrite) {
    return MakeError(std::error_code(EEXIST, std::generic_category()),
                     "'" + path + "' exists; add --overwrite to replace it");
  }
  if (!S_ISREG(st.st_mode)) {
    return MakeError(Errc::kInvalidArgument,
                     "'" + path +
                         "' exists and is not a regular file; --overwrite replaces only "
                         "files");
  }
  return Destination(path, path + ".vstack-new-" + std::to_string(::getpid()));
}

Destination::Destination(Destination&& other) noexcept
    : path_(std::move(other.path_)), temp_(std::move(other.temp_)) {
  other.temp_.clear();
}

Destination::~Destination() {
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

Status Destination::Commit() {
  if (temp_.empty()) return OkStatus();
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    return MakeError(std::error_code(errno, std::generic_category()),
                     "cannot replace '" + path_ + "': " + std::strerror(errno));
  }
  temp_.clear();
  return OkStatus();
}

}  // namespace vstack::cli
