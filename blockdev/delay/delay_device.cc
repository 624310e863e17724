#include "blockdev/delay/delay_device.h"

#include "lib/registry.h"
#include "lib/size.h"

namespace vstack {
namespace {

class DelayQueue final : public TimedQueue {
 public:
  DelayQueue(DelayDevice& device, std::unique_ptr<IoQueue> lower, Clock& clock, uint64_t seed)
      : TimedQueue(device, std::move(lower), clock, device.config().queue),
        config_(device.config()),
        rng_(seed) {}

 protected:
  uint64_t ServiceNs(const IoRequest& req) override {
    switch (req.op) {
      case Op::kRead:
        return config_.read.Draw(rng_);
      case Op::kFlush:
        return config_.flush.Draw(rng_);
      default:
        return config_.write.Draw(rng_);
    }
  }

 private:
  const DelayConfig& config_;
  TimingRng rng_;
};

Result<DevicePtr> OpenDelay(DevicePtr lower, const OptionValues& o, const OpenOptions&) {
  DelayConfig c;
  const std::string both = o.Get("latency");
  VSTACK_ASSIGN_OR_RETURN(c.read,
                          ServiceTime::Parse("delay: read", o.Has("read") ? o.Get("read") : both));
  VSTACK_ASSIGN_OR_RETURN(
      c.write, ServiceTime::Parse("delay: write", o.Has("write") ? o.Get("write") : both));
  VSTACK_ASSIGN_OR_RETURN(c.flush, ServiceTime::Parse("delay: flush", o.Get("flush")));
  VSTACK_ASSIGN_OR_RETURN(int64_t qd, o.Int("qd", 0, 1 << 20));
  c.queue.max_in_service = static_cast<uint32_t>(qd);
  VSTACK_ASSIGN_OR_RETURN(c.queue.bytes_per_s, o.Size("bw"));
  VSTACK_ASSIGN_OR_RETURN(int64_t seed, o.Int("seed", 0, INT64_MAX));
  c.seed = static_cast<uint64_t>(seed);
  return MakeDevice<DelayDevice>(std::move(lower), c, SystemClock());
}

ComponentInfo DelayComponent() {
  ComponentInfo c;
  c.name = "delay";
  c.kind = ComponentKind::kLayer;
  c.summary =
      "a device's service time: fixed/uniform/log-normal latency, a QD limit, a bandwidth cap";
  c.options = {
      {"latency", "service time of reads and writes: 5ms, uniform:MIN:MAX, lognormal:MEAN:SD", "0"},
      {"read", "service time of reads (overrides latency)", ""},
      {"write", "service time of writes, write-zeroes and discards (overrides latency)", ""},
      {"flush", "service time of flushes", "0"},
      {"qd", "requests served at a time per queue (0: no limit)", "0"},
      {"bw", "bytes per second per queue for reads and writes, e.g. 200M (0: no cap)", "0"},
      {"seed", "seed of the random draws (queue i uses seed + i)", "1"},
  };
  c.open_layer = &OpenDelay;
  return c;
}

}  // namespace

DelayDevice::DelayDevice(DevicePtr lower, DelayConfig config, Clock& clock)
    : Layer("delay", std::move(lower)), config_(config), clock_(clock) {
  DeclareCounters(TimedQueue::CounterNames());
}

std::string DelayDevice::Describe() const {
  std::string s = "delay read " + config_.read.ToString() + ", write " + config_.write.ToString();
  if (config_.queue.max_in_service) s += ", qd " + std::to_string(config_.queue.max_in_service);
  if (config_.queue.bytes_per_s) s += ", " + FormatSize(config_.queue.bytes_per_s) + "/s";
  return s;
}

void DelayDevice::Properties(PropertyList& out) const {
  out.push_back({"read_latency", config_.read.ToString(), ""});
  out.push_back({"write_latency", config_.write.ToString(), ""});
  out.push_back({"flush_latency", config_.flush.ToString(), ""});
  out.push_back({"queue_depth_limit", uint64_t{config_.queue.max_in_service}, ""});
  out.push_back({"bandwidth", config_.queue.bytes_per_s, "bytes/s"});
}

Result<std::unique_ptr<IoQueue>> DelayDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  const uint64_t seed = config_.seed + queues_opened_.fetch_add(1);
  return std::unique_ptr<IoQueue>(new DelayQueue(*this, std::move(lower), clock_, seed));
}

VSTACK_REGISTER_COMPONENT(delay, DelayComponent());

}  // namespace vstack
