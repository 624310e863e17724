// The template layer. To write a new layer, copy this file and its header, rename, and change
// only what your layer does differently. Two starting points (docs/design.md, "Adding a layer"):
//
//  - a layer that translates each request into one request below (a fixed offset, a flag it
//    drops, an error it injects) uses ForwardingQueue (lib/forwarding_queue.h), as this file
//    does, and overrides its Translate hook;
//  - a layer that maps virtual grains to stored units (deduplication, compression, checksums)
//    builds on blockdev/grainmap instead.
//
// The parts every layer has:
//
//  1. A device class deriving from Layer. Its constructor decides the geometry and the
//     capabilities it offers above. Only claim what you implement: the base class emulates FUA
//     (write + flush) and write-zeroes (writes of zeros) when a capability is missing, and it
//     validates every request (bounds, alignment, read-only) before your queue sees it.
//  2. A queue, one per thread, owning a queue of the lower device opened for the same thread.
//     Per-queue state needs no locks; state shared by all queues (a map, an index) lives in the
//     device and must be thread-safe. ForwardingQueue sends each request down as one lower
//     request and completes the caller's request with its status; a layer that needs several
//     lower requests per request derives from LayerQueue and counts them with PendingParent
//     (lib/parent_completion.h).
//  3. Completion callbacks run on the queue's thread, inside the lower queue's Submit or Poll.
//     They may complete the caller's request and submit more lower requests; they must not
//     block.
//  4. Registration: a ComponentInfo with the name used in specs, its options with defaults and
//     help, and the factory; VSTACK_REGISTER_COMPONENT adds it. Then add the layer to the
//     conformance suite (tests/conformance/targets.cc) and write docs/layers/<name>.md.
#include "blockdev/passthrough/passthrough_device.h"

#include "lib/forwarding_queue.h"
#include "lib/registry.h"

namespace vstack {
namespace {

ComponentInfo PassthroughComponent() {
  ComponentInfo c;
  c.name = "passthrough";
  c.kind = ComponentKind::kLayer;
  c.summary = "forwards every request unchanged: the cost of one layer, and the template";
  c.open_layer = [](DevicePtr lower, const OptionValues&, const OpenOptions&) -> Result<DevicePtr> {
    return MakeDevice<PassthroughDevice>(std::move(lower));
  };
  return c;
}

}  // namespace

// Geometry and capabilities are exactly the lower device's. Layer starts with them, minus
// kCapResizable, which a passthrough implements by forwarding.
PassthroughDevice::PassthroughDevice(DevicePtr lower) : Layer("passthrough", std::move(lower)) {
  set_capabilities(capabilities() | (lower_device().capabilities() & kCapResizable));
}

// A passthrough changes nothing, so the forwarding queue is used as it is: its default
// Translate copies each request (same op, flags, offset and buffers). A layer that translates
// derives from ForwardingQueue and overrides Translate, e.g. to shift the offset:
//
//   std::error_code Translate(const IoRequest& req, IoRequest* down) override {
//     down->offset += data_offset_;
//     return {};
//   }
Result<std::unique_ptr<IoQueue>> PassthroughDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return std::unique_ptr<IoQueue>(new ForwardingQueue(*this, std::move(lower)));
}

VSTACK_REGISTER_COMPONENT(passthrough, PassthroughComponent());

}  // namespace vstack
