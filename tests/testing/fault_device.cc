#include "tests/testing/fault_device.h"

#include <cerrno>


namespace vstack::testing {
namespace {

// Forwards every request; a write the budget does not admit fails with ENOSPC instead.
class FaultQueue final : public ForwardingQueue {
 public:
  FaultQueue(FaultDevice& dev, std::unique_ptr<IoQueue> lower)
      : ForwardingQueue(dev, std::move(lower)), dev_(dev) {}

 protected:
  std::error_code Translate(const IoRequest& req, IoRequest* down) override {
    const bool writes = req.op == Op::kWrite || req.op == Op::kWriteZeroes;
    if (writes && !dev_.Admit(req.length)) return SystemError(ENOSPC);
    return {};
  }

 private:
  FaultDevice& dev_;
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

std::unique_ptr<ForwardingQueue> FaultDevice::NewQueue(std::unique_ptr<IoQueue> lower) {
  return std::make_unique<FaultQueue>(*this, std::move(lower));
}

}  // namespace vstack::testing
