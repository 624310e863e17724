// hv: the hypervisor's cost per I/O, for a guest's disk: latency added to every request (the
// exit, the VMBus or virtio round trip, the completion interrupt), separately for reads and
// writes, and CPU burned per request on the submitting thread (real work, so CPU accounting and
// the whitepaper's IOPS per %CPU move). Presets name the published measurement they come from.
// Built on TimedQueue without a service limit, its latency starting when the lower request
// completes: it adds to the lower device's time, as the exit and the completion path surround
// the device's work.
// docs/layers/hv.md.
//
// Spec: hv:preset=hyperv-passthrough+delay:read=5.4066ms,write=254.4us+null:1G
//       hv:read=50us,write=50us,cpu=5us+<lower>
#ifndef VSTACK_BLOCKDEV_HV_HV_DEVICE_H_
#define VSTACK_BLOCKDEV_HV_HV_DEVICE_H_

#include <string>

#include "blockdev/emulation/service_time.h"
#include "blockdev/emulation/timed_queue.h"
#include "lib/layer.h"

namespace vstack {

struct HvConfig {
  std::string preset;       // "" when none
  ServiceTime read, write;  // added latency; write also for write-zeroes, discard and flush
  ServiceTime cpu;          // CPU burned per request on the submitting thread
  uint64_t seed = 1;
};

// A named calibration and where its numbers come from.
struct HvPreset {
  const char* name;
  uint64_t read_ns, write_ns, cpu_ns;
  const char* source;
};
const std::vector<HvPreset>& HvPresets();

class HvDevice final : public Layer {
 public:
  enum Counter { kCpuNs = TimedQueue::kFirstOwnCounter };

  // `clock` must outlive the device; SystemClock() outside tests.
  HvDevice(DevicePtr lower, HvConfig config, Clock& clock);

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override {
    return lower_device().MapExtents(offset, length, out);
  }
  const HvConfig& config() const { return config_; }

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;

 private:
  const HvConfig config_;
  Clock& clock_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_HV_HV_DEVICE_H_
