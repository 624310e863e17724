#include "lib/forwarding_queue.h"

#include <typeinfo>

namespace vstack {

ForwardingQueue::~ForwardingQueue() = default;

ForwardingQueue::Forwarded* ForwardingQueue::TakeNew() {
  entries_.push_back(NewEntry());
  Forwarded* f = entries_.back().get();
  // Set once: an entry always comes back to this queue, through the same callback (a plain
  // queue's skips the hook).
  f->queue = this;
  f->down.on_complete = plain_ > 0 ? &ForwardingQueue::OnDownPlain : &ForwardingQueue::OnDown;
  f->down.user_data = f;
  return f;
}

void ForwardingQueue::DoSubmit(std::span<IoRequest* const> batch) {
  // Known only once constructed: during construction typeid names this class.
  if (plain_ < 0) plain_ = typeid(*this) == typeid(ForwardingQueue);
  if (plain_) {
    SubmitPlain(batch);
    return;
  }
  BeforeWork();
  for (IoRequest* req : batch) Accept(*req);
  SendForwarded();
  AfterSubmit();
  SendForwarded();
}

void ForwardingQueue::SubmitPlain(std::span<IoRequest* const> batch) {
  std::vector<IoRequest*> out;
  out.swap(outgoing_);  // reentrancy-safe reuse of the vector's capacity
  for (IoRequest* up : batch) {
    Forwarded* f = Take();
    f->up = up;
    ForwardRequest(*up, &f->down);
    out.push_back(&f->down);
  }
  SubmitForwarded(out);
  out.clear();
  outgoing_.swap(out);
}

ForwardingQueue::Forwarded* ForwardingQueue::Forward(IoRequest& req) {
  Forwarded* f = Take();
  ForwardRequest(req, &f->down);
  if (std::error_code refused = Translate(req, &f->down)) {
    Recycle(f);
    Complete(req, refused);
    return nullptr;
  }
  f->up = &req;
  outgoing_.push_back(&f->down);
  return f;
}

void ForwardingQueue::SendForwarded() {
  while (!outgoing_.empty()) {
    // Requests that complete inline run OnLowerDone inside this Submit, which may forward
    // more: those land in outgoing_ again and go in the next round.
    std::vector<IoRequest*> batch;
    batch.swap(outgoing_);
    lower().Submit(batch);
    batch.clear();
    if (outgoing_.empty()) outgoing_.swap(batch);  // keep the capacity
  }
}

void ForwardingQueue::DoPoll(bool wait) {
  if (plain_ > 0) {
    LayerQueue::DoPoll(wait);
    return;
  }
  BeforeWork();
  Progress(wait);
  SendForwarded();
}

// The device below completed a lower request: the layer decides (OnLowerDone); a plain queue
// completes the caller's request with its status.
void ForwardingQueue::OnDown(IoRequest& down) {
  Forwarded* f = static_cast<Forwarded*>(down.user_data);
  f->queue->OnLowerDone(*f);
}

void ForwardingQueue::OnDownPlain(IoRequest& down) {
  Forwarded* f = static_cast<Forwarded*>(down.user_data);
  f->queue->Finish(*f, down.status);
}

}  // namespace vstack
