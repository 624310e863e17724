// delay: a device's service time. Each request takes a time drawn from the read, write or flush
// distribution (fixed, uniform, log-normal), optionally with at most `qd` requests in service
// at a time (a disk or LUN serving N at once) and a bandwidth cap. Over null it is a model of
// a disk; over a real backend it makes a memory-speed stack as slow as a SAN. No busy-waiting:
// see blockdev/emulation/timed_queue.h. With `stalls` the device also stops for those lengths,
// spread evenly over every `stall_period` (one schedule for all queues): a request due during a
// stall completes when it ends, as every request in flight waits out a frozen disk.
//
// What it adds: its queue, a TimedQueue drawing each request's service time (and holding it
// through a stall); Describe, Properties and the counters. Everything else is inherited from
// ForwardingLayer (lib/forwarding_layer.h): the data, geometry, capabilities and allocation are
// the device below's.
// docs/layers/delay.md.
//
// Spec: delay:read=5.4066ms,write=254.4us,qd=1,bw=100M+null:1G
//       delay:latency=pct:0=1ms/50=6ms/100=80ms,stalls=2s/500ms,stall_period=60s+null:1G
#ifndef VSTACK_BLOCKDEV_DELAY_DELAY_DEVICE_H_
#define VSTACK_BLOCKDEV_DELAY_DELAY_DEVICE_H_

#include <utility>
#include <vector>

#include "blockdev/emulation/emulation_layer.h"
#include "blockdev/emulation/service_time.h"
#include "blockdev/emulation/timed_queue.h"

namespace vstack {

struct DelayConfig {
  ServiceTime read, write;  // also used for write-zeroes (write) and discard (write)
  ServiceTime flush;
  TimedQueueOptions queue;  // qd limit and bandwidth, per queue
  uint64_t seed = 1;
  // Device stalls: lengths in ns, in the order they come, in every period (0: none).
  std::vector<uint64_t> stalls;
  uint64_t stall_period_ns = 0;
};

class DelayDevice final : public EmulationLayer<DelayConfig> {
 public:
  enum Counter { kStallNs = TimedQueue::kFirstOwnCounter, kStalled };

  // `clock` must outlive the device; SystemClock() outside tests. The stall schedule starts
  // now: the first stall begins half a gap into the first period (gap = (period - sum of the
  // stalls) / stalls), the next a gap after the end of the one before.
  DelayDevice(DevicePtr lower, DelayConfig config, Clock& clock);

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  // `t` (Clock ns), or the end of the stall `t` falls in. Thread-safe.
  uint64_t HeldUntil(uint64_t t) const;

 protected:
  std::unique_ptr<ForwardingQueue> NewQueue(std::unique_ptr<IoQueue> lower) override;

 private:
  const uint64_t origin_ns_;
  std::vector<std::pair<uint64_t, uint64_t>> stall_windows_;  // [start, end) within a period
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_DELAY_DELAY_DEVICE_H_
