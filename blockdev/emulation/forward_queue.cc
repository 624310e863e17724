#include "blockdev/emulation/forward_queue.h"

namespace vstack {

void ForwardQueue::DoSubmit(std::span<IoRequest* const> batch) {
  BeforeWork();
  std::vector<IoRequest*> children;
  children.swap(children_);  // reentrancy-safe reuse of the vector's capacity
  for (IoRequest* parent : batch) {
    if (Intercept(*parent)) continue;
    Child* c = pool_.Get();
    c->parent = parent;
    c->queue = this;
    ForwardRequest(*parent, &c->req);
    c->req.on_complete = &ForwardQueue::OnLowerDone;
    c->req.user_data = c;
    children.push_back(&c->req);
  }
  if (!children.empty()) lower().Submit(children);
  children.clear();
  children_.swap(children);
}

void ForwardQueue::DoPoll(bool wait) {
  BeforeWork();
  LayerQueue::DoPoll(wait);
}

void ForwardQueue::OnLowerDone(IoRequest& req) {
  Child* c = static_cast<Child*>(req.user_data);
  c->queue->Complete(*c->parent, req.status);
  c->queue->pool_.Put(c);
}

}  // namespace vstack
