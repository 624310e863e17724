// ready: CPU Ready. The queue's thread is stalled — no submits, no completions delivered — for
// durations drawn from a distribution (rounded up to whole hypervisor quanta) and placed so
// that the stalled share of wall time equals `pct` (StallSchedule). Each queue (each thread of
// a workload, a vCPU) has its own schedule, started when the queue opens. Stalls happen at the
// top of Submit and Poll, the only moments a layer runs on that thread. The injected time is
// counted (stalled_ns, stalls), so the attribution shows it. Its queue is a ForwardingQueue with
// one hook (BeforeWork); everything else is the device below's, inherited from ForwardingLayer
// (lib/forwarding_layer.h). docs/layers/ready.md.
//
// Spec: ready:pct=5.1,stall=exp:4ms,quantum=1ms+<lower>
#ifndef VSTACK_BLOCKDEV_READY_READY_DEVICE_H_
#define VSTACK_BLOCKDEV_READY_READY_DEVICE_H_

#include "blockdev/emulation/emulation_layer.h"
#include "blockdev/emulation/service_time.h"

namespace vstack {

struct ReadyConfig {
  double fraction = 0;  // pct / 100, in [0, 1)
  ServiceTime stall = ServiceTime::Fixed(4'000'000);
  uint64_t quantum_ns = 1'000'000;
  uint64_t seed = 1;
};

class ReadyDevice final : public EmulationLayer<ReadyConfig> {
 public:
  enum Counter { kStalledNs, kStalls };

  // `clock` must outlive the device; SystemClock() outside tests.
  ReadyDevice(DevicePtr lower, ReadyConfig config, Clock& clock);

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;

 protected:
  std::unique_ptr<ForwardingQueue> NewQueue(std::unique_ptr<IoQueue> lower) override;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_READY_READY_DEVICE_H_
