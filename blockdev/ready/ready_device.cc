#include "blockdev/ready/ready_device.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "blockdev/emulation/stall_schedule.h"
#include "lib/registry.h"

namespace vstack {
namespace {

class ReadyQueue final : public ForwardingQueue {
 public:
  ReadyQueue(ReadyDevice& device, std::unique_ptr<IoQueue> lower, Clock& clock, uint64_t seed)
      : ForwardingQueue(device, std::move(lower)),
        clock_(clock),
        schedule_(device.config().fraction, device.config().stall, device.config().quantum_ns, seed,
                  clock.Now()) {}

 protected:
  // At the top of every Submit and Poll: the only moments this thread runs the layer.
  void BeforeWork() override {
    const uint64_t now = clock_.Now();
    const uint64_t stall = schedule_.Due(now);
    if (stall == 0) return;
    clock_.SleepUntil(now + stall);
    Count(ReadyDevice::kStalledNs, stall);
    Count(ReadyDevice::kStalls);
  }

 private:
  Clock& clock_;
  StallSchedule schedule_;
};

Result<DevicePtr> OpenReady(DevicePtr lower, const OptionValues& o, const OpenOptions& open) {
  ReadyConfig c;
  const std::string pct = o.Get("pct");
  char* end = nullptr;
  const double v = std::strtod(pct.c_str(), &end);
  if (end == pct.c_str() || *end != '\0' || !std::isfinite(v) || v < 0 || v >= 100) {
    return MakeError(Errc::kBadSpec,
                     "ready: pct '" + pct + "' is not a percentage in [0, 100) (e.g. 5.1)");
  }
  c.fraction = v / 100;
  VSTACK_ASSIGN_OR_RETURN(c.stall, ServiceTime::Parse("ready: stall", o.Get("stall")));
  auto q = ParseDurationNs(o.Get("quantum"));
  if (!q) return MakeError(Errc::kBadSpec, "ready: quantum " + q.error().message);
  c.quantum_ns = *q;
  if (c.fraction > 0 && c.stall.mean_ns() <= 0) {  // stalls of no length: nothing is injected
    return MakeError(Errc::kBadSpec, "ready: pct=" + pct + " with stall=" + o.Get("stall") +
                                         " stalls for no time; give the stalls a length (e.g. "
                                         "stall=exp:4ms)");
  }
  VSTACK_ASSIGN_OR_RETURN(c.seed, SeedOption(o));
  return MakeDevice<ReadyDevice>(std::move(lower), c, open.clock_or_system());
}

ComponentInfo ReadyComponent() {
  return LayerComponent(
      "ready",
      "CPU Ready: stalls each queue's thread for pct% of wall time (no submits, no completions)",
      {
          {"pct", "RDY%: share of wall time each queue's thread is stalled, 0 to <100", "0"},
          {"stall", "stall length: 4ms, exp:MEAN, uniform:MIN:MAX, lognormal:MEAN:SD", "exp:4ms"},
          {"quantum", "stalls are whole multiples of this hypervisor quantum (0: not rounded)",
           "1ms"},
          {"seed", "seed of the stall draws (queue i uses seed + i)", "1"},
      },
      &OpenReady);
}

}  // namespace

ReadyDevice::ReadyDevice(DevicePtr lower, ReadyConfig config, Clock& clock)
    : EmulationLayer("ready", std::move(lower), config, clock) {
  DeclareCounters({"stalled_ns", "stalls"});
}

std::string ReadyDevice::Describe() const {
  char buf[128];
  std::snprintf(buf, sizeof buf, "ready %.3g%% stalled, stalls %s, quantum %s",
                config().fraction * 100, config().stall.ToString().c_str(),
                FormatDurationNs(double(config().quantum_ns)).c_str());
  return buf;
}

void ReadyDevice::Properties(PropertyList& out) const {
  out.push_back({"ready_pct", config().fraction * 100, "%"});
  out.push_back({"stall", config().stall.ToString(), ""});
  out.push_back({"quantum_ns", config().quantum_ns, "ns"});
}

std::unique_ptr<ForwardingQueue> ReadyDevice::NewQueue(std::unique_ptr<IoQueue> lower) {
  return std::make_unique<ReadyQueue>(*this, std::move(lower), clock(), NextQueueSeed());
}

VSTACK_REGISTER_COMPONENT(ready, ReadyComponent());

}  // namespace vstack
