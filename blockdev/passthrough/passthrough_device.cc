// The template layer. To write a new layer, copy this file and its header, rename, and change
// only what your layer does differently. The parts every layer has:
//
//  1. A device class deriving from Layer. Its constructor decides the geometry and the
//     capabilities it offers above. Only claim what you implement: the base class emulates FUA
//     (write + flush) and write-zeroes (writes of zeros) when a capability is missing, and it
//     validates every request (bounds, alignment, read-only) before your queue sees it.
//  2. A queue class deriving from LayerQueue, one per thread. It owns a queue of the lower
//     device, opened for the same thread. Per-queue state needs no locks; state shared by all
//     queues (a map, an index) lives in the device and must be thread-safe.
//  3. DoSubmit: turn each request into zero or more requests for the lower queue. Submit them
//     as one batch (one io_uring_submit below for the whole batch). Keep the caller's request as
//     the parent; complete it exactly once, from the children's completion callback.
//  4. Completion callbacks run on this queue's thread, inside the lower queue's Submit or Poll.
//     They may call Complete() on the parent and may submit more lower requests; they must not
//     block.
//  5. Registration: a ComponentInfo with the name used in specs, its options with defaults and
//     help, and the factory; VSTACK_REGISTER_COMPONENT adds it. Then add the layer to the
//     conformance suite (tests/conformance/targets.cc) and write docs/layers/<name>.md.
#include "blockdev/passthrough/passthrough_device.h"

#include "lib/registry.h"

namespace vstack {
namespace {

class PassthroughQueue final : public LayerQueue {
 public:
  PassthroughQueue(PassthroughDevice& device, std::unique_ptr<IoQueue> lower)
      : LayerQueue(device, std::move(lower)) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    // Build the whole batch of lower requests first, then submit it once.
    std::vector<IoRequest*> children;
    children.swap(children_);  // reentrancy-safe reuse of the vector's capacity
    for (IoRequest* parent : batch) {
      Child* c = pool_.Get();
      c->parent = parent;
      c->queue = this;
      // A passthrough copies the request as it is: same op, flags, offset and buffers.
      ForwardRequest(*parent, &c->req);
      c->req.on_complete = &PassthroughQueue::OnLowerDone;
      c->req.user_data = c;
      children.push_back(&c->req);
    }
    lower().Submit(children);
    children.clear();
    children_.swap(children);
  }

 private:
  // One lower request on behalf of one caller's request.
  struct Child {
    IoRequest req;
    IoRequest* parent = nullptr;
    PassthroughQueue* queue = nullptr;
  };

  // Runs when the lower device completes a child: complete the parent with the same status and
  // recycle the child.
  static void OnLowerDone(IoRequest& req) {
    Child* c = static_cast<Child*>(req.user_data);
    c->queue->Complete(*c->parent, req.status);
    c->queue->pool_.Put(c);
  }

  RequestPool<Child> pool_;
  std::vector<IoRequest*> children_;
};

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

// Geometry and capabilities are exactly the lower device's, which is what Layer starts with.
PassthroughDevice::PassthroughDevice(DevicePtr lower) : Layer("passthrough", std::move(lower)) {}

Result<std::unique_ptr<IoQueue>> PassthroughDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return std::unique_ptr<IoQueue>(new PassthroughQueue(*this, std::move(lower)));
}

VSTACK_REGISTER_COMPONENT(passthrough, PassthroughComponent());

}  // namespace vstack
