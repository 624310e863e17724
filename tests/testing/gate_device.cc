#include "tests/testing/gate_device.h"

#include <vector>

namespace vstack::testing {

void Gate::Shut() {
  std::lock_guard lock(mu_);
  open_ = false;
}

void Gate::Open() {
  std::lock_guard lock(mu_);
  open_ = true;
  changed_.notify_all();
}

bool Gate::is_open() const {
  std::lock_guard lock(mu_);
  return open_;
}

uint64_t Gate::held() const {
  std::lock_guard lock(mu_);
  return held_;
}

bool Gate::WaitHeld(uint64_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return held_ >= n; });
}

void Gate::OpenAfter(std::chrono::milliseconds after) {
  std::lock_guard lock(mu_);
  valve_ = after;
}

bool Gate::opened_by_itself() const {
  std::lock_guard lock(mu_);
  return opened_by_itself_;
}

bool Gate::Arrive(uint64_t n) {
  std::lock_guard lock(mu_);
  if (!open_) {
    held_ += n;
    changed_.notify_all();
  }
  return open_;
}

void Gate::WaitOpen() {
  std::unique_lock lock(mu_);
  if (valve_ == std::chrono::milliseconds::max()) {
    changed_.wait(lock, [&] { return open_; });
  } else if (!changed_.wait_for(lock, valve_, [&] { return open_; })) {
    open_ = true;
    opened_by_itself_ = true;
    changed_.notify_all();
  }
}

namespace {

// Keeps requests while the gate is shut; sends them down, unchanged, once it is open.
class GateQueue final : public LayerQueue {
 public:
  GateQueue(GateDevice& device, std::unique_ptr<IoQueue> lower)
      : LayerQueue(device, std::move(lower)), gate_(device.gate()) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    waiting_.insert(waiting_.end(), batch.begin(), batch.end());
    if (gate_.Arrive(batch.size())) ForwardWaiting();
  }

  void DoPoll(bool wait) override {
    if (!waiting_.empty()) {
      if (wait) gate_.WaitOpen();
      if (gate_.is_open()) ForwardWaiting();
    }
    LayerQueue::DoPoll(wait);
  }

 private:
  struct Child {
    IoRequest req;
    IoRequest* parent = nullptr;
    GateQueue* queue = nullptr;
  };

  void ForwardWaiting() {
    std::vector<IoRequest*> down;
    for (IoRequest* parent : waiting_) {
      Child* c = pool_.Get();
      c->parent = parent;
      c->queue = this;
      ForwardRequest(*parent, &c->req);
      c->req.on_complete = &GateQueue::OnLowerDone;
      c->req.user_data = c;
      down.push_back(&c->req);
    }
    waiting_.clear();
    SubmitForwarded(down);
  }

  static void OnLowerDone(IoRequest& req) {
    Child* c = static_cast<Child*>(req.user_data);
    c->queue->Complete(*c->parent, req.status);
    c->queue->pool_.Put(c);
  }

  Gate& gate_;
  std::vector<IoRequest*> waiting_;
  RequestPool<Child> pool_;
};

}  // namespace

Result<std::unique_ptr<IoQueue>> GateDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return std::unique_ptr<IoQueue>(new GateQueue(*this, std::move(lower)));
}

}  // namespace vstack::testing
