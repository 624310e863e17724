// passthrough: forwards every operation to the device below, unchanged, capabilities and
// geometry included. It measures what one layer of vstack costs, and it is the template a new
// layer is copied from (see passthrough_device.cc and docs/design.md, "Adding a layer").
//
// What it adds: nothing but one forwarding level (its own statistics). Everything else is
// inherited from ForwardingLayer (lib/forwarding_layer.h): geometry, capabilities, Resize,
// MapExtents, SpaceOf and a plain ForwardingQueue.
//
// Spec: passthrough+<lower>
#ifndef VSTACK_BLOCKDEV_PASSTHROUGH_PASSTHROUGH_DEVICE_H_
#define VSTACK_BLOCKDEV_PASSTHROUGH_PASSTHROUGH_DEVICE_H_

#include "lib/forwarding_layer.h"

namespace vstack {

class PassthroughDevice final : public ForwardingLayer {
 public:
  explicit PassthroughDevice(DevicePtr lower) : ForwardingLayer("passthrough", std::move(lower)) {}
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_PASSTHROUGH_PASSTHROUGH_DEVICE_H_
