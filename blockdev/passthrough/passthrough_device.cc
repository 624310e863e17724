// The template layer. To write a new layer, copy this file and its header, rename, and change
// only what your layer does differently. Which base to start from (docs/design.md, "Adding a
// layer"):
//
//  - a layer that keeps the data below as they are (same addresses, same bytes) and changes
//    only how or when requests get there derives from ForwardingLayer (lib/forwarding_layer.h),
//    as this one does, and inherits everything: geometry, capabilities, Resize, MapExtents,
//    SpaceOf, and a queue that forwards each request unchanged. To act on requests it overrides
//    NewQueue and returns a ForwardingQueue subclass (lib/forwarding_queue.h) with the hooks it
//    needs: Translate to refuse a request (blockdev/error), BeforeWork to stall the thread
//    (blockdev/ready), Accept/OnLowerDone to hold requests (blockdev/emulation/timed_queue.h);
//  - a layer that sends each request down as one request but changes its address or the
//    device's size (a fixed offset, an image format's header) derives from Layer
//    (lib/layer.h), states every operation (MapExtents, Resize...) itself, and may still use a
//    ForwardingQueue with a Translate hook, as formats/vhd does for fixed disks:
//
//      std::error_code Translate(const IoRequest& req, IoRequest* down) override {
//        down->offset += data_offset_;
//        return {};
//      }
//
//  - a layer that maps virtual grains to stored units (deduplication, compression, checksums)
//    builds on blockdev/grainmap instead.
//
// The parts every layer has:
//
//  1. A device class. Its constructor decides the geometry and the capabilities it offers
//     above (Layer starts with the lower device's). Only claim what you implement: the base
//     class emulates FUA (write + flush) and write-zeroes (writes of zeros) when a capability
//     is missing, and it validates every request (bounds, alignment, read-only) before your
//     queue sees it.
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

#include "lib/registry.h"

namespace vstack {
namespace {

ComponentInfo PassthroughComponent() {
  return LayerComponent(
      "passthrough", "forwards every request unchanged: the cost of one layer, and the template",
      {}, [](DevicePtr lower, const OptionValues&, const OpenOptions&) -> Result<DevicePtr> {
        return MakeDevice<PassthroughDevice>(std::move(lower));
      });
}

}  // namespace

VSTACK_REGISTER_COMPONENT(passthrough, PassthroughComponent());

}  // namespace vstack
