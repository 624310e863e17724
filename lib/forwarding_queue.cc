#include "lib/forwarding_queue.h"

namespace vstack {

void ForwardingQueue::DoSubmit(std::span<IoRequest* const> batch) {
  // Build the whole batch of lower requests first, then submit it once.
  std::vector<IoRequest*> children;
  children.swap(children_);  // reentrancy-safe reuse of the vector's capacity
  for (IoRequest* parent : batch) {
    Child* c = pool_.Get();
    ForwardRequest(*parent, &c->req);
    if (std::error_code refused = Translate(*parent, &c->req)) {
      pool_.Put(c);
      Complete(*parent, refused);
      continue;
    }
    c->parent = parent;
    c->queue = this;
    c->req.on_complete = &ForwardingQueue::OnChildDone;
    c->req.user_data = c;
    children.push_back(&c->req);
  }
  if (!children.empty()) lower().Submit(children);
  children.clear();
  children_.swap(children);
}

// The lower device completed a child: complete the parent and recycle the child.
void ForwardingQueue::OnChildDone(IoRequest& req) {
  Child* c = static_cast<Child*>(req.user_data);
  ForwardingQueue* q = c->queue;
  q->Complete(*c->parent, q->OnLowerDone(*c->parent, req));
  q->pool_.Put(c);
}

}  // namespace vstack
