// passthrough: forwards every operation to the device below, unchanged, capabilities and
// geometry included. It measures what one layer of vstack costs, and it is the template a new
// layer is copied from (see passthrough_device.cc and docs/design.md, "Adding a layer").
//
// Spec: passthrough+<lower>
#ifndef VSTACK_BLOCKDEV_PASSTHROUGH_PASSTHROUGH_DEVICE_H_
#define VSTACK_BLOCKDEV_PASSTHROUGH_PASSTHROUGH_DEVICE_H_

#include "lib/layer.h"

namespace vstack {

class PassthroughDevice final : public Layer {
 public:
  explicit PassthroughDevice(DevicePtr lower);

  std::string Describe() const override { return "passthrough"; }
  // Allocation is the lower device's: a passthrough neither moves nor changes data.
  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override {
    return lower_device().MapExtents(offset, length, out);
  }

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;
  // Resizing is the lower device's too (Layer does not inherit kCapResizable by default).
  Status DoResize(uint64_t size) override { return lower_device().Resize(size); }
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_PASSTHROUGH_PASSTHROUGH_DEVICE_H_
