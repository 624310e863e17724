#include "tests/testing/fault_device.h"

#include <cerrno>

namespace vstack::testing {
namespace {

class FaultQueue final : public LayerQueue {
 public:
  FaultQueue(FaultDevice& dev, std::unique_ptr<IoQueue> lower)
      : LayerQueue(dev, std::move(lower)), dev_(dev) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    std::vector<IoRequest*> children;
    for (IoRequest* parent : batch) {
      const bool writes = parent->op == Op::kWrite || parent->op == Op::kWriteZeroes;
      if (writes && !dev_.Admit(parent->length)) {
        Complete(*parent, SystemError(ENOSPC));
        continue;
      }
      Child* c = pool_.Get();
      c->parent = parent;
      c->queue = this;
      c->req = IoRequest{};
      ForwardRequest(*parent, &c->req);
      c->req.on_complete = &OnDone;
      c->req.user_data = c;
      children.push_back(&c->req);
    }
    if (!children.empty()) lower().Submit(children);
  }

 private:
  struct Child {
    IoRequest req;
    IoRequest* parent = nullptr;
    FaultQueue* queue = nullptr;
  };
  static void OnDone(IoRequest& r) {
    Child* c = static_cast<Child*>(r.user_data);
    c->queue->Complete(*c->parent, r.status);
    c->queue->pool_.Put(c);
  }

  FaultDevice& dev_;
  RequestPool<Child> pool_;
};

}  // namespace

bool FaultDevice::Admit(uint64_t bytes) {
  if (!armed_.load()) return true;
  uint64_t left = budget_.load();
  while (left >= bytes) {
    if (budget_.compare_exchange_weak(left, left - bytes)) return true;
  }
  failed_.fetch_add(1);
  return false;
}

Result<std::unique_ptr<IoQueue>> FaultDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return std::unique_ptr<IoQueue>(new FaultQueue(*this, std::move(lower)));
}

}  // namespace vstack::testing
