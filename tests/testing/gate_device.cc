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

// Keeps requests while the gate is shut; forwards them, unchanged, once it is open. A policy
// over the one ForwardingQueue (lib/forwarding_queue.h): Accept holds, Progress waits.
class GateQueue final : public ForwardingQueue {
 public:
  GateQueue(GateDevice& device, std::unique_ptr<IoQueue> lower)
      : ForwardingQueue(device, std::move(lower)), gate_(device.gate()) {}

 protected:
  void Accept(IoRequest& req) override {
    waiting_.push_back(&req);
    ++arrived_;
  }
  void AfterSubmit() override {
    if (gate_.Arrive(arrived_)) ForwardWaiting();
    arrived_ = 0;
  }
  void Progress(bool wait) override {
    if (!waiting_.empty()) {
      if (wait) gate_.WaitOpen();
      if (gate_.is_open()) ForwardWaiting();
      SendForwarded();  // below before the wait on the queue below
    }
    ForwardingQueue::Progress(wait);
  }

 private:
  void ForwardWaiting() {
    for (IoRequest* req : waiting_) Forward(*req);
    waiting_.clear();
  }

  Gate& gate_;
  std::vector<IoRequest*> waiting_;
  uint64_t arrived_ = 0;  // of the Submit running
};

}  // namespace

std::unique_ptr<ForwardingQueue> GateDevice::NewQueue(std::unique_ptr<IoQueue> lower) {
  return std::make_unique<GateQueue>(*this, std::move(lower));
}

}  // namespace vstack::testing
