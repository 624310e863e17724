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
  ComponentInfo c;
  c.name = "vhdx";
  c.kind = ComponentKind::kLayer;
  c.summary = "Microsoft VHDX image, fixed or dynamic, with its metadata log";
  c.open_layer = [](DevicePtr lower, const OptionValues&,
                    const OpenOptions& open) -> Result<DevicePtr> {
    VhdxOptions options;
    options.for_check = open.for_check;
    return VhdxDevice::Open(std::move(lower), options);
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

// What OpenImage needs to keep a probed format fixed (docs/stack-spec.md): the file identifier
// at offset 0, and why a file that has it is not a valid VHDX.
ProbeDetails VhdxProbeDetails() {
  ProbeDetails d;
  d.signatures = {{0, "vhdxfile", "vhdx"}};
  d.problem = [](BlockDevice& device) {
    std::string problem;
    ProbeImage(device, &problem);
    return problem;
  };
  return d;
}

}  // namespace

VSTACK_REGISTER_COMPONENT(vhdx, VhdxComponent());
static const bool vhdx_probe_details [[maybe_unused]] =
    RegisterProbeDetails("vhdx", VhdxProbeDetails());

}  // namespace vstack::vhdx
