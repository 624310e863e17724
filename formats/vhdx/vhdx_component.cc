// Registers the `vhdx` layer: the probe that lets OpenImage open a plain path as
// vhdx+file:PATH (the "vhdxfile" identifier and a valid header), the signature the raw guard
// keeps guests from writing, and the create hook behind CreateImage("vhdx", ...) and
// `vstack create -f vhdx`.
#include "formats/vhdx/vhdx_create.h"
#include "formats/vhdx/vhdx_device.h"
#include "lib/probe_guard.h"
#include "lib/registry.h"

namespace vstack::vhdx {
namespace {

ComponentInfo VhdxComponent() {
  auto open_vhdx = [](DevicePtr lower, const OptionValues&,
                      const OpenOptions& open) -> Result<DevicePtr> {
    VhdxOptions options;
    options.for_check = open.for_check;
    return VhdxDevice::Open(std::move(lower), options);
  };
  return ImageFormatComponent<&ProbeImage, &ParseCreateParams, &CreateImageFile>(
      LayerComponent("vhdx", "Microsoft VHDX image, fixed or dynamic, with its metadata log", {},
                     open_vhdx),
      CreateOptionInfos());
}

// What OpenImage needs to keep a probed format fixed (docs/stack-spec.md): the file identifier
// at offset 0, and why a file that has it is not a valid VHDX.
}  // namespace

VSTACK_REGISTER_COMPONENT(vhdx, VhdxComponent());
static const bool vhdx_probe_details [[maybe_unused]] =
    RegisterProbeDetails("vhdx", ProbeDetailsOf<&ProbeImage>({{0, "vhdxfile", "vhdx"}}));

}  // namespace vstack::vhdx
