// Registers the `vhd` layer: its spec options, the probe that lets OpenImage open a plain path
// as vhd+file:PATH, and the create hook behind CreateImage("vhd", ...) and `vstack create`.
#include "formats/vhd/vhd_create.h"
#include "formats/vhd/vhd_device.h"
#include "lib/probe_guard.h"
#include "lib/registry.h"

namespace vstack::vhd {
namespace {

ComponentInfo VhdComponent() {
  auto open_vhd = [](DevicePtr lower, const OptionValues& o,
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
    VSTACK_ASSIGN_OR_RETURN(options.recover, o.Bool("recover"));
    options.for_check = open.for_check || options.recover;
    options.force_share = open.force_share;
    return VhdDevice::Open(std::move(lower), options);
  };
  return ImageFormatComponent<&ProbeImage, &ParseCreateParams, &CreateImageFile>(
      LayerComponent(
          "vhd", "Microsoft VHD image, fixed, dynamic or differencing (detected from the footer)",
          {
              {"size_rule",
               "virtual size: auto (current_size; CHS geometry for creators 'vpc ' and 'qemu'), "
               "current or chs",
               "auto"},
              {"reserve",
               "dynamic disks in a file: bytes of blocks reserved at once when the file grows, so "
               "that "
               "allocations inside need no flush (0: grow for each commit)",
               "64M"},
              {"parent_check",
               "differencing disks: strict (parent unique ID and time stamp must match), uuid (ID "
               "only), or off (forced open, for recovery)",
               "strict"},
              {"recover",
               "on: open a damaged image leniently and read-only, to copy its data out (blocks "
               "whose BAT "
               "entries overlap other structures read as stored; blocks past the end of the file "
               "read "
               "as zeros); `vstack check` names it when it does not repair",
               "off"},
              {"parent",
               "differencing disks: the parent's stack, e.g. vhd\\+uring\\:/img/base.vhd (escape + "
               ", :), "
               "instead of the locators; none: open the image alone, read-only",
               ""},
          },
          open_vhd),
      CreateOptionInfos());
}

// What OpenImage needs to keep a probed format fixed (docs/stack-spec.md): the footer cookie
// at the end (512- and legacy 511-byte footers) and the dynamic disk's footer copy at offset
// 0, and why a file with a cookie is not a valid VHD.
}  // namespace

VSTACK_REGISTER_COMPONENT(vhd, VhdComponent());
static const bool vhd_probe_details [[maybe_unused]] = RegisterProbeDetails(
    "vhd", ProbeDetailsOf<&ProbeImage>(
               {{-512, "conectix", "vhd"}, {-511, "conectix", "vhd"}, {0, "conectix", "vhd"}}));

}  // namespace vstack::vhd
