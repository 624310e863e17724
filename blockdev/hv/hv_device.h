// hv: the hypervisor's cost per I/O, for a guest's disk: latency added to every request (the
// exit, the VMBus or virtio round trip, the completion interrupt), separately for reads and
// writes, and CPU burned per request on the submitting thread (real work, so CPU accounting and
// the whitepaper's IOPS per %CPU move). Presets name the published measurement they come from.
// Built on TimedQueue without a service limit, its latency starting when the lower request
// completes: it adds to the lower device's time, as the exit and the completion path surround
// the device's work. With `vcpus` the guest's CPU is modelled instead of burned: each request
// holds one of that many vCPUs, shared by all queues, for its CPU time while the submitting
// thread sleeps, so the guest can be CPU-bound (vcpus / cpu requests per second) whatever the
// host's load. Everything else (the data, geometry, capabilities, allocation) is the device
// below's, inherited from ForwardingLayer (lib/forwarding_layer.h).
// docs/layers/hv.md.
//
// Spec: hv:preset=hyperv-passthrough+delay:read=5.4066ms,write=254.4us+null:1G
//       hv:read=50us,write=50us,cpu=5us+<lower>
//       hv:cpu=275us,vcpus=2+<lower>
#ifndef VSTACK_BLOCKDEV_HV_HV_DEVICE_H_
#define VSTACK_BLOCKDEV_HV_HV_DEVICE_H_

#include <mutex>
#include <string>
#include <vector>

#include "blockdev/emulation/emulation_layer.h"
#include "blockdev/emulation/service_time.h"
#include "blockdev/emulation/timed_queue.h"

namespace vstack {

struct HvConfig {
  std::string preset;       // "" when none
  ServiceTime read, write;  // added latency; write also for write-zeroes, discard and flush
  ServiceTime cpu;          // CPU burned per request on the submitting thread
  uint32_t vcpus = 0;       // 0: burned; N: held on one of N modelled vCPUs, asleep
  uint64_t seed = 1;
};

// A named calibration and where its numbers come from.
struct HvPreset {
  const char* name;
  uint64_t read_ns, write_ns, cpu_ns;
  const char* source;
};
const std::vector<HvPreset>& HvPresets();

class HvDevice final : public EmulationLayer<HvConfig> {
 public:
  // cpu_ns (burned or held), held_cpu_ns (held on the modelled vCPUs: the guest's CPU, which
  // the host does not spend; the bench's CPU attribution reports it beside the layer's host
  // CPU), then with vcpus one counter per vCPU (vcpu0_ns, vcpu1_ns, ...): the CPU each held.
  enum Counter { kCpuNs = TimedQueue::kFirstOwnCounter, kHeldCpuNs, kVcpu0Ns };

  // `clock` must outlive the device; SystemClock() outside tests.
  HvDevice(DevicePtr lower, HvConfig config, Clock& clock);

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  // Books `ns` of CPU at `now` on the vCPU that is free first (FIFO: a request waits for
  // it): which one, and when its CPU time ends. REQUIRES: config().vcpus > 0. Thread-safe.
  std::pair<uint32_t, uint64_t> ReserveVcpu(uint64_t now, uint64_t ns);

 protected:
  std::unique_ptr<ForwardingQueue> NewQueue(std::unique_ptr<IoQueue> lower) override;

 private:
  std::mutex vcpu_mu_;
  std::vector<uint64_t> vcpu_free_at_;  // when each vCPU's booked CPU ends
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_HV_HV_DEVICE_H_
