#include "formats/vhd/vhd_chain.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>

#include "formats/vhd/vhd_parent.h"
#include "lib/registry.h"
#include "lib/spec.h"

namespace vstack::vhd {
namespace {

namespace fs = std::filesystem;

std::string ChainText(const std::vector<std::string>& chain, const std::string& last) {
  std::string s;
  for (const std::string& c : chain) s += c + " -> ";
  return s + last;
}

// The backend a parent file is opened with: the child's own (file, or uring), with O_DIRECT
// if the child has it, so that every level of a chain does I/O the same way.
SpecPart ParentBackend(const BlockDevice& child_lower, const std::string& path) {
  SpecPart part{child_lower.kind() == "uring" ? "uring" : "file", path, {}};
  PropertyList props;
  child_lower.Properties(props);
  for (const Property& p : props) {
    if (p.key == "direct" && std::holds_alternative<bool>(p.value) && std::get<bool>(p.value)) {
      part.options.push_back({"direct", "on"});
    }
  }
  return part;
}

// Opens the VHD file `path` read-only as a parent, with the child's backend and options.
Result<DevicePtr> OpenOne(const BlockDevice& child_lower, const std::string& path,
                          const VhdOptions& options, std::vector<std::string>* chain,
                          const std::string& what) {
  OpenOptions ro;
  ro.read_only = true;
  ro.for_check = options.for_check;
  ro.force_share = options.force_share;
  VhdOptions parent_options = options;
  parent_options.parent_spec.clear();
  parent_options.chain = chain;
  Result<DevicePtr> lower = vstack::Open(FormatSpecPart(ParentBackend(child_lower, path)), ro);
  if (!lower) return MakeError(lower.error().code, what + ": " + lower.error().message);
  Result<DevicePtr> dev = VhdDevice::Open(std::move(*lower), parent_options);
  if (!dev) return MakeError(dev.error().code, what + ": " + dev.error().message);
  return dev;
}

}  // namespace

std::string FileIdentity(const std::string& path) {
  std::error_code ec;
  fs::path c = fs::canonical(path, ec);
  return ec ? path : c.string();
}

std::string DevicePath(const BlockDevice& device) {
  PropertyList props;
  device.Properties(props);
  for (const Property& p : props) {
    if (p.key == "path" && std::holds_alternative<std::string>(p.value)) {
      return std::get<std::string>(p.value);
    }
  }
  return "";
}

Result<DevicePtr> OpenParent(BlockDevice& lower, const VhdImage& image,
                             const VhdOptions& options) {
  const std::string child_path = DevicePath(lower);
  std::vector<std::string> local;
  std::vector<std::string>* chain = options.chain != nullptr ? options.chain : &local;
  if (chain->empty()) chain->push_back(child_path.empty() ? "(device)" : FileIdentity(child_path));
  if (chain->size() >= kMaxChainDepth) {
    return MakeError(Errc::kInvalidArgument,
                     "VHD: the chain is deeper than " + std::to_string(kMaxChainDepth) +
                         " images (at " + chain->back() + ")");
  }
  const std::string name = Utf16ToUtf8(image.header.parent_name);

  if (!options.parent_spec.empty()) {
    // An explicit parent stack, e.g. vhd+uring:/images/base.vhd: opened as given, read-only.
    const std::string what = "parent stack '" + options.parent_spec + "'";
    OpenOptions ro;
    ro.read_only = true;
    ro.for_check = options.for_check;
    ro.force_share = options.force_share;
    Result<DevicePtr> dev = vstack::Open(options.parent_spec, ro);
    if (!dev) return MakeError(dev.error().code, what + ": " + dev.error().message);
    const auto* vhd = dynamic_cast<const VhdDevice*>(dev->get());
    if (vhd == nullptr) {
      return MakeError(Errc::kInvalidArgument,
                       what + ": the top of a parent stack must be a vhd layer, not '" +
                           (*dev)->kind() + "'");
    }
    VSTACK_RETURN_IF_ERROR(
        CheckParentLink(image.header, vhd->image().footer, options.parent_check, what));
    return std::move(*dev);
  }
  if (child_path.empty()) {
    return MakeError(Errc::kInvalidArgument,
                     "VHD: differencing disk (parent '" + name +
                         "') on a device without a path: name its parent stack with "
                         "vhd:parent=SPEC");
  }

  const std::vector<LocatorPath> locators = ReadLocators(lower, image);
  const std::vector<std::string> candidates =
      ParentCandidates(locators, image.header.parent_name, child_path);
  std::optional<Error> first_error;
  std::string tried;
  for (const std::string& c : candidates) {
    tried += (tried.empty() ? "" : ", ") + c;
    std::error_code ec;
    if (!fs::is_regular_file(c, ec) && !fs::is_block_file(c, ec)) continue;
    const std::string id = FileIdentity(c);
    if (std::find(chain->begin(), chain->end(), id) != chain->end()) {
      return MakeError(Errc::kInvalidArgument,
                       "VHD: the parent chain loops: " + ChainText(*chain, id));
    }
    std::vector<std::string> sub = *chain;
    sub.push_back(id);
    const std::string what = "parent '" + c + "'";
    Result<DevicePtr> dev = OpenOne(lower, c, options, &sub, what);
    if (!dev) {
      if (!first_error) first_error = dev.error();
      continue;
    }
    const auto* vhd = dynamic_cast<const VhdDevice*>(dev->get());
    Status link = CheckParentLink(image.header, vhd->image().footer, options.parent_check, what);
    if (link) {
      *chain = std::move(sub);
      return std::move(*dev);
    }
    if (!first_error) first_error = link.error();
  }
  if (first_error) return *first_error;
  std::string problems;
  for (const LocatorPath& l : locators) {
    if (!l.problem.empty()) problems += "; " + l.problem;
  }
  return MakeError(Errc::kNotFound, "VHD: parent '" + name + "' of differencing disk '" +
                                        child_path + "' not found (tried: " +
                                        (tried.empty() ? "nothing usable" : tried) + ")" +
                                        problems);
}

}  // namespace vstack::vhd
