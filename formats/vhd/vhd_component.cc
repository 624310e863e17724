// Registers the `vhd` layer: its spec options, the probe that lets OpenImage open a plain path
// as vhd+file:PATH, and the create hook behind CreateImage("vhd", ...) and `vstack create`.
#include "formats/vhd/vhd_create.h"
#include "formats/vhd/vhd_device.h"
#include "lib/registry.h"

namespace vstack::vhd {
namespace {

ComponentInfo VhdComponent() {
  ComponentInfo c;
  c.name = "vhd";
  c.kind = ComponentKind::kLayer;
  c.summary =
      "Microsoft VHD image, fixed, dynamic or differencing (detected from the footer)";
  c.options = {
      {"size_rule",
       "virtual size: auto (current_size; CHS geometry for creators 'vpc ' and 'qemu'), "
       "current or chs",
       "auto"},
      {"reserve",
       "dynamic disks in a file: bytes of blocks reserved at once when the file grows, so that "
       "allocations inside need no flush (0: grow for each commit)",
       "64M"},
      {"parent_check",
       "differencing disks: strict (parent unique ID and time stamp must match), uuid (ID "
       "only), or off (forced open, for recovery)",
       "strict"},
      {"parent",
       "differencing disks: the parent's stack, e.g. vhd\\+uring\\:/img/base.vhd (escape + , :), "
       "instead of the locators; none: open the image alone, read-only",
       ""},
  };
  c.open_layer = [](DevicePtr lower, const OptionValues& o,
                    const OpenOptions& open) -> Result<DevicePtr> {
    VSTACK_ASSIGN_OR_RETURN(std::string rule, o.Choice("size_rule", {"auto", "current", "chs"}));
    VhdOptions options;
    options.size_rule = rule == "current" ? SizeRule::kCurrent
                        : rule == "chs"   ? SizeRule::kChs
                                          : SizeRule::kAuto;
    VSTACK_ASSIGN_OR_RETURN(options.reserve, o.Size("reserve"));
    VSTACK_ASSIGN_OR_RETURN(std::string check, o.Choice("parent_check", {"strict", "uuid", "off"}));
    options.parent_check = check == "uuid"  ? ParentCheck::kUuid
                           : check == "off" ? ParentCheck::kOff
                                            : ParentCheck::kStrict;
    options.parent_spec = o.Get("parent");
    if (options.parent_spec == "none") {
      options.parent_spec.clear();
      options.open_parent = false;
    }
    options.for_check = open.for_check;
    return VhdDevice::Open(std::move(lower), options);
  };
  c.probe = [](BlockDevice& device) { return ProbeImage(device); };
  c.create = [](const std::string& path, uint64_t size,
                const OptionValues& o) -> Result<DevicePtr> {
    VSTACK_ASSIGN_OR_RETURN(CreateParams p, ParseCreateParams(size, o));
    return CreateImageFile(path, p);
  };
  c.create_options = CreateOptionInfos();
  return c;
}

}  // namespace

VSTACK_REGISTER_COMPONENT(vhd, VhdComponent());

}  // namespace vstack::vhd
