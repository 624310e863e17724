#include "lib/forwarding_queue.h"

#include <typeinfo>

namespace vstack {

void ForwardingQueue::DoSubmit(std::span<IoRequest* const> batch) {
  // Known only once constructed: during construction typeid names this class.
  if (plain_ < 0) plain_ = typeid(*this) == typeid(ForwardingQueue);
  // Build the whole batch of lower requests first, then submit it once.
  std::vector<IoRequest*> children;
  children.swap(children_);  // reentrancy-safe reuse of the vector's capacity
  for (IoRequest* parent : batch) {
    Child* c = pool_.Get();
    ForwardRequest(*parent, &c->req);
    if (!plain_) {
      if (std::error_code refused = Translate(*parent, &c->req)) {
        pool_.Put(c);
        Complete(*parent, refused);
        continue;
      }
    }
    c->parent = parent;
    c->queue = this;
    c->req.on_complete = &ForwardingQueue::OnChildDone;
    c->req.user_data = c;
    children.push_back(&c->req);
  }
  if (!children.empty()) {
    if (plain_) {
      SubmitForwarded(children);
    } else {
      lower().Submit(children);
    }
  }
  children.clear();
  children_.swap(children);
}

// The lower device completed a child: complete the parent and recycle the child.
void ForwardingQueue::OnChildDone(IoRequest& req) {
  Child* c = static_cast<Child*>(req.user_data);
  ForwardingQueue* q = c->queue;
  q->Complete(*c->parent, q->plain_ ? req.status : q->OnLowerDone(*c->parent, req));
  q->pool_.Put(c);
}

}  // namespace vstack
