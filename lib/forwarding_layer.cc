#include "lib/forwarding_layer.h"

namespace vstack {

ForwardingLayer::ForwardingLayer(std::string kind, DevicePtr lower)
    : Layer(std::move(kind), std::move(lower)) {
  set_capabilities(capabilities() | (lower_device().capabilities() & kCapResizable));
}

std::unique_ptr<ForwardingQueue> ForwardingLayer::NewQueue(std::unique_ptr<IoQueue> lower) {
  return std::make_unique<ForwardingQueue>(*this, std::move(lower));
}

Result<std::unique_ptr<IoQueue>> ForwardingLayer::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return std::unique_ptr<IoQueue>(NewQueue(std::move(lower)));
}

}  // namespace vstack
