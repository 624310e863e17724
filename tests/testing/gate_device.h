// GateDevice: a test layer that holds requests at a gate until the test opens it, so that a
// test knows a thread is inside the stack, blocked in its queue's Poll, for as long as it
// wants: to close a device while another thread reads (lib/shared_sync_io.h), or to show that a
// Python thread's I/O releases the GIL (tests/python). Requests that arrive while the gate is
// shut wait in their queue; Poll(wait) blocks until the gate opens, and they go down then.
// Open gates forward everything unchanged. A ForwardingLayer whose queue is a policy over the
// library's one ForwardingQueue (lib/forwarding_queue.h): Accept holds, Progress waits.
#ifndef VSTACK_TESTS_TESTING_GATE_DEVICE_H_
#define VSTACK_TESTS_TESTING_GATE_DEVICE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "lib/forwarding_layer.h"

namespace vstack::testing {

// The gate itself, shared by the layers that use it and the test that opens it. Thread-safe.
class Gate {
 public:
  explicit Gate(bool open = false) : open_(open) {}

  void Shut();
  void Open();
  bool is_open() const;
  // Requests that have arrived at the gate while it was shut, in total.
  uint64_t held() const;
  // Blocks until held() >= n; false if `timeout` passed first.
  bool WaitHeld(uint64_t n, std::chrono::milliseconds timeout);
  // A safety valve for tests that would otherwise hang when what they check is broken (a
  // thread inside the stack holds what the opener needs): a queue that has waited `after` at
  // the shut gate opens it itself, and opened_by_itself() says so. Default: never.
  void OpenAfter(std::chrono::milliseconds after);
  bool opened_by_itself() const;

  // For the queues: counts `n` arrivals if the gate is shut; returns whether it is open.
  bool Arrive(uint64_t n);
  // Blocks until the gate is open (or the safety valve opens it).
  void WaitOpen();

 private:
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool open_;
  uint64_t held_ = 0;
  std::chrono::milliseconds valve_ = std::chrono::milliseconds::max();
  bool opened_by_itself_ = false;
};

class GateDevice final : public ForwardingLayer {
 public:
  GateDevice(DevicePtr lower, std::shared_ptr<Gate> gate)
      : ForwardingLayer("gate", std::move(lower)), gate_(std::move(gate)) {}
  Gate& gate() const { return *gate_; }

 protected:
  std::unique_ptr<ForwardingQueue> NewQueue(std::unique_ptr<IoQueue> lower) override;

 private:
  std::shared_ptr<Gate> gate_;
};

}  // namespace vstack::testing

#endif  // VSTACK_TESTS_TESTING_GATE_DEVICE_H_
