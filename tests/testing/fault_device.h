// FaultDevice: a test layer that forwards everything to the device below until it runs out of
// room: once armed with a budget of bytes, writes (and write-zeroes) that would exceed it fail
// with ENOSPC, as a file on a full file system does. Reads and flushes keep working. Used to
// check that layers above surface ENOSPC and keep data flushed earlier intact.
#ifndef VSTACK_TESTS_TESTING_FAULT_DEVICE_H_
#define VSTACK_TESTS_TESTING_FAULT_DEVICE_H_

#include <atomic>
#include <cstdint>

#include "lib/forwarding_layer.h"

namespace vstack::testing {

class FaultDevice final : public ForwardingLayer {
 public:
  explicit FaultDevice(DevicePtr lower) : ForwardingLayer("fault", std::move(lower)) {}

  // From now on, writes may add up to `bytes` more bytes; any write beyond fails with ENOSPC.
  void ArmNoSpace(uint64_t bytes) {
    budget_.store(bytes);
    armed_.store(true);
  }
  void Disarm() { armed_.store(false); }
  uint64_t failed_writes() const { return failed_.load(); }

  // True if a write of `bytes` may go down (and takes it from the budget).
  bool Admit(uint64_t bytes);
  // The queue's check (RefusingQueue): ENOSPC for a write the budget does not admit.
  std::error_code Refuse(const IoRequest& req);

 protected:
  std::unique_ptr<ForwardingQueue> NewQueue(std::unique_ptr<IoQueue> lower) override;

 private:
  std::atomic<bool> armed_{false};
  std::atomic<uint64_t> budget_{0};
  std::atomic<uint64_t> failed_{0};
};

}  // namespace vstack::testing

#endif  // VSTACK_TESTS_TESTING_FAULT_DEVICE_H_
