// delay: a device's service time. Each request takes a time drawn from the read, write or flush
// distribution (fixed, uniform, log-normal), optionally with at most `qd` requests in service
// at a time (a disk or LUN serving N at once) and a bandwidth cap. Over null it is a model of
// a disk; over a real backend it makes a memory-speed stack as slow as a SAN. No busy-waiting:
// see blockdev/emulation/timed_queue.h. docs/layers/delay.md.
//
// Spec: delay:read=5.4066ms,write=254.4us,qd=1,bw=100M+null:1G
#ifndef VSTACK_BLOCKDEV_DELAY_DELAY_DEVICE_H_
#define VSTACK_BLOCKDEV_DELAY_DELAY_DEVICE_H_

#include <atomic>

#include "blockdev/emulation/service_time.h"
#include "blockdev/emulation/timed_queue.h"
#include "lib/layer.h"

namespace vstack {

struct DelayConfig {
  ServiceTime read, write;  // also used for write-zeroes (write) and discard (write)
  ServiceTime flush;
  TimedQueueOptions queue;  // qd limit and bandwidth, per queue
  uint64_t seed = 1;
};

class DelayDevice final : public Layer {
 public:
  // `clock` must outlive the device; SystemClock() outside tests.
  DelayDevice(DevicePtr lower, DelayConfig config, Clock& clock);

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override {
    return lower_device().MapExtents(offset, length, out);
  }
  const DelayConfig& config() const { return config_; }

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;

 private:
  const DelayConfig config_;
  Clock& clock_;
  std::atomic<uint64_t> queues_opened_{0};
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_DELAY_DELAY_DEVICE_H_
