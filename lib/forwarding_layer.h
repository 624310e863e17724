// ForwardingLayer: the base of a layer that keeps the device below's data as they are — same
// addresses, same bytes — and changes only how or when requests get there: it counts them
// (passthrough), times them (delay, hv), stalls the thread that sends them (ready) or fails some
// of them (error). As with leveldb's EnvWrapper, everything is forwarded by default and a layer
// overrides only what it changes.
//
// What a ForwardingLayer inherits:
//  - geometry and capabilities: the device below's, kCapResizable included (Resize is the
//    device below's);
//  - MapExtents and SpaceOf: the device below's, since its addresses are this layer's; and
//    OriginOfUnwritten: the device below at the same offset (it writes nothing of its own);
//  - fresh(), closing the device below (Layer); no metadata: nothing to Check, persist or
//    report in Space() (a walker of the stack, such as `vstack space`, goes on below);
//  - Describe(): the kind; Properties(): none;
//  - the queue: a plain ForwardingQueue (lib/forwarding_queue.h) over a queue of the device below,
//    opened for the same thread. A layer with per-request behaviour overrides NewQueue and
//    returns its own ForwardingQueue subclass, which overrides the hooks it needs.
//
// Only a layer that preserves data may derive from it. A layer that changes addressing or
// content (an image format, a transform, anything that maps, splits or rewrites requests)
// derives from Layer (lib/layer.h) and states every operation: forwarding MapExtents, SpaceOf or
// Resize by default would describe the wrong bytes there.
#ifndef VSTACK_LIB_FORWARDING_LAYER_H_
#define VSTACK_LIB_FORWARDING_LAYER_H_

#include <memory>
#include <optional>
#include <vector>

#include "lib/export.h"
#include "lib/forwarding_queue.h"
#include "lib/layer.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

class ForwardingLayer : public Layer {
 public:
  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override {
    return lower_device().MapExtents(offset, length, out);
  }
  std::optional<SpaceUsage> SpaceOf(uint64_t offset, uint64_t length) const override {
    return lower_device().SpaceOf(offset, length);
  }
  UnwrittenOrigin OriginOfUnwritten(uint64_t offset) const override {
    return UnwrittenOrigin::Of(lower_device(), offset, size_bytes() - offset);
  }

 protected:
  // `kind` is the registered name ("delay"); `lower` the device below, which it owns.
  ForwardingLayer(std::string kind, DevicePtr lower);

  // This layer's queue over `lower`, a queue of the device below opened for the same thread.
  // Called from OpenQueue, possibly on several threads at once. Default: a plain
  // ForwardingQueue.
  virtual std::unique_ptr<ForwardingQueue> NewQueue(std::unique_ptr<IoQueue> lower);

  Result<std::unique_ptr<IoQueue>> DoOpenQueue() final;
  Status DoResize(uint64_t size) override { return lower_device().Resize(size); }
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_FORWARDING_LAYER_H_
