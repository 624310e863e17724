// EmulationLayer<Config>: the device side shared by the emulation layers (delay:, error:, hv:,
// ready:). Each keeps the data below as they are, so it is a ForwardingLayer
// (lib/forwarding_layer.h) and inherits geometry, capabilities, MapExtents, Resize and its
// queue's forwarding from it; this base adds the parsed options (`Config`, with a `seed`), the
// clock the layer times with, and one seed per queue. A layer adds its Describe, Properties and
// NewQueue (a ForwardingQueue subclass: its policy).
#ifndef VSTACK_BLOCKDEV_EMULATION_EMULATION_LAYER_H_
#define VSTACK_BLOCKDEV_EMULATION_EMULATION_LAYER_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "lib/clock.h"
#include "lib/forwarding_layer.h"
#include "lib/registry.h"

namespace vstack {

template <typename Config>
class EmulationLayer : public ForwardingLayer {
 public:
  const Config& config() const { return config_; }

 protected:
  // `clock` must outlive the device; SystemClock() outside tests.
  EmulationLayer(std::string kind, DevicePtr lower, Config config, Clock& clock)
      : ForwardingLayer(std::move(kind), std::move(lower)),
        config_(std::move(config)),
        clock_(clock) {}

  Clock& clock() const { return clock_; }
  // The seed of the queue being opened: config().seed + i for the i-th queue (from 0), so
  // that each thread of a workload draws its own sequence. Thread-safe.
  uint64_t NextQueueSeed() { return config_.seed + queues_opened_.fetch_add(1); }

 private:
  const Config config_;
  Clock& clock_;
  std::atomic<uint64_t> queues_opened_{0};
};

// The `seed` option every emulation layer declares: a non-negative integer.
inline Result<uint64_t> SeedOption(const OptionValues& o) {
  VSTACK_ASSIGN_OR_RETURN(int64_t seed, o.Int("seed", 0, INT64_MAX));
  return static_cast<uint64_t>(seed);
}

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_EMULATION_EMULATION_LAYER_H_
