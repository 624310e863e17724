#include "tests/testing/fault_device.h"

#include <cerrno>

namespace vstack::testing {

bool FaultDevice::Admit(uint64_t bytes) {
  if (!armed_.load()) return true;
  uint64_t left = budget_.load();
  while (left >= bytes) {
    if (budget_.compare_exchange_weak(left, left - bytes)) return true;
  }
  failed_.fetch_add(1);
  return false;
}

std::error_code FaultDevice::Refuse(const IoRequest& req) {
  const bool writes = req.op == Op::kWrite || req.op == Op::kWriteZeroes;
  if (writes && !Admit(req.length)) return SystemError(ENOSPC);
  return NoError();
}

std::unique_ptr<ForwardingQueue> FaultDevice::NewQueue(std::unique_ptr<IoQueue> lower) {
  return std::make_unique<RefusingQueue<FaultDevice>>(*this, std::move(lower));
}

}  // namespace vstack::testing
