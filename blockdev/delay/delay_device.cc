#include "blockdev/delay/delay_device.h"

#include "lib/registry.h"
#include "lib/size.h"

namespace vstack {
namespace {

class DelayQueue final : public TimedQueue {
 public:
  DelayQueue(DelayDevice& device, std::unique_ptr<IoQueue> lower, Clock& clock, uint64_t seed)
      : TimedQueue(device, std::move(lower), clock, device.config().queue),
        device_(device),
        config_(device.config()),
        rng_(seed) {}

 protected:
  uint64_t ServiceNs(const IoRequest& req) override {
    const uint64_t ns = Draw(req);
    if (config_.stalls.empty()) return ns;
    const uint64_t now = clock().Now();
    const uint64_t held = device_.HeldUntil(now + ns);
    if (held == now + ns) return ns;
    Count(DelayDevice::kStallNs, held - (now + ns));
    Count(DelayDevice::kStalled);
    return held - now;
  }

 private:
  uint64_t Draw(const IoRequest& req) {
    switch (req.op) {
      case Op::kRead:
        return config_.read.Draw(rng_);
      case Op::kFlush:
        return config_.flush.Draw(rng_);
      default:
        return config_.write.Draw(rng_);
    }
  }

  const DelayDevice& device_;
  const DelayConfig& config_;
  TimingRng rng_;
};

// stalls=2s/500ms and stall_period=60s: the lengths must fit in the period.
Status ParseStalls(const OptionValues& o, DelayConfig* c) {
  if (!o.Has("stalls")) {
    if (o.Has("stall_period")) {
      return MakeError(Errc::kBadSpec, "delay: stall_period needs stalls (e.g. stalls=2s/500ms)");
    }
    return OkStatus();
  }
  const std::string text = o.Get("stalls");
  uint64_t sum = 0;
  for (size_t start = 0; start <= text.size();) {
    size_t slash = text.find('/', start);
    if (slash == std::string::npos) slash = text.size();
    auto ns = ParseDurationNs(text.substr(start, slash - start));
    if (!ns || *ns == 0) {
      return MakeError(Errc::kBadSpec,
                       "delay: stalls '" + text + "' is not a list of durations above 0 (e.g. 2s/500ms)");
    }
    c->stalls.push_back(*ns);
    sum += *ns;
    start = slash + 1;
  }
  if (!o.Has("stall_period")) {
    return MakeError(Errc::kBadSpec, "delay: stalls need a stall_period (e.g. stall_period=60s)");
  }
  auto period = ParseDurationNs(o.Get("stall_period"));
  if (!period || *period <= sum) {
    return MakeError(Errc::kBadSpec,
                     "delay: stall_period '" + o.Get("stall_period") +
                         "' must be a duration longer than the stalls together (" +
                         FormatDurationNs(double(sum)) + ")");
  }
  c->stall_period_ns = *period;
  return OkStatus();
}

Result<DevicePtr> OpenDelay(DevicePtr lower, const OptionValues& o, const OpenOptions& open) {
  DelayConfig c;
  const std::string both = o.Get("latency");
  // An error names the option written: read= or write=, else latency= (both).
  VSTACK_ASSIGN_OR_RETURN(c.read, ServiceTime::Parse(o.Has("read") ? "delay: read" : "delay: latency",
                                                     o.Has("read") ? o.Get("read") : both));
  VSTACK_ASSIGN_OR_RETURN(c.write,
                          ServiceTime::Parse(o.Has("write") ? "delay: write" : "delay: latency",
                                             o.Has("write") ? o.Get("write") : both));
  VSTACK_ASSIGN_OR_RETURN(c.flush, ServiceTime::Parse("delay: flush", o.Get("flush")));
  VSTACK_ASSIGN_OR_RETURN(int64_t qd, o.Int("qd", 0, 1 << 20));
  c.queue.max_in_service = static_cast<uint32_t>(qd);
  VSTACK_ASSIGN_OR_RETURN(c.queue.bytes_per_s, o.Size("bw"));
  VSTACK_ASSIGN_OR_RETURN(c.seed, SeedOption(o));
  VSTACK_RETURN_IF_ERROR(ParseStalls(o, &c));
  return MakeDevice<DelayDevice>(std::move(lower), c, open.clock_or_system());
}

ComponentInfo DelayComponent() {
  return LayerComponent(
      "delay",
      "a device's service time: fixed/uniform/log-normal latency, a QD limit, a bandwidth cap",
      {
          {"latency", "service time of reads and writes: 5ms, uniform:MIN:MAX, lognormal:MEAN:SD",
           "0"},
          {"read", "service time of reads (overrides latency)", ""},
          {"write", "service time of writes, write-zeroes and discards (overrides latency)", ""},
          {"flush", "service time of flushes", "0"},
          {"qd", "requests served at a time per queue (0: no limit)", "0"},
          {"bw", "bytes per second per queue for reads and writes, e.g. 200M (0: no cap)", "0"},
          {"seed", "seed of the random draws (queue i uses seed + i)", "1"},
          {"stalls",
           "the device stops for these lengths in every stall_period, e.g. 2s/500ms: a "
           "request due during a stall completes when it ends",
           ""},
          {"stall_period", "the period the stalls repeat in, spread evenly over it (e.g. 60s)", ""},
      },
      &OpenDelay);
}

}  // namespace

DelayDevice::DelayDevice(DevicePtr lower, DelayConfig options, Clock& clock)
    : EmulationLayer("delay", std::move(lower), std::move(options), clock),
      origin_ns_(clock.Now()) {
  const DelayConfig& c = config();
  std::vector<std::string> names = TimedQueue::CounterNames();
  names.push_back("stall_ns");
  names.push_back("stalled");
  DeclareCounters(names);
  uint64_t sum = 0;
  for (uint64_t len : c.stalls) sum += len;
  if (c.stalls.empty() || c.stall_period_ns <= sum) return;
  const uint64_t gap = (c.stall_period_ns - sum) / c.stalls.size();
  uint64_t at = gap / 2;
  for (uint64_t len : c.stalls) {
    stall_windows_.emplace_back(at, at + len);
    at += len + gap;
  }
}

uint64_t DelayDevice::HeldUntil(uint64_t t) const {
  if (stall_windows_.empty() || t < origin_ns_) return t;
  const uint64_t phase = (t - origin_ns_) % config().stall_period_ns;
  for (const auto& [start, end] : stall_windows_) {
    if (phase >= start && phase < end) return t + (end - phase);
  }
  return t;
}

std::string DelayDevice::Describe() const {
  const DelayConfig& c = config();
  std::string s = "delay read " + c.read.ToString() + ", write " + c.write.ToString();
  if (c.queue.max_in_service) s += ", qd " + std::to_string(c.queue.max_in_service);
  if (c.queue.bytes_per_s) s += ", " + FormatSize(c.queue.bytes_per_s) + "/s";
  if (!c.stalls.empty()) {
    uint64_t sum = 0;
    for (uint64_t len : c.stalls) sum += len;
    s += ", " + std::to_string(c.stalls.size()) + " stalls (" + FormatDurationNs(double(sum)) +
         ") every " + FormatDurationNs(double(c.stall_period_ns));
  }
  return s;
}

void DelayDevice::Properties(PropertyList& out) const {
  const DelayConfig& c = config();
  out.push_back({"read_latency", c.read.ToString(), ""});
  out.push_back({"write_latency", c.write.ToString(), ""});
  out.push_back({"flush_latency", c.flush.ToString(), ""});
  out.push_back({"queue_depth_limit", uint64_t{c.queue.max_in_service}, ""});
  out.push_back({"bandwidth", c.queue.bytes_per_s, "bytes/s"});
  if (!c.stalls.empty()) {
    std::string list;
    for (uint64_t len : c.stalls) list += (list.empty() ? "" : "/") + FormatDurationNs(double(len));
    out.push_back({"stalls", list, ""});
    out.push_back({"stall_period", FormatDurationNs(double(c.stall_period_ns)), ""});
  }
}

std::unique_ptr<ForwardingQueue> DelayDevice::NewQueue(std::unique_ptr<IoQueue> lower) {
  return std::make_unique<DelayQueue>(*this, std::move(lower), clock(), NextQueueSeed());
}

VSTACK_REGISTER_COMPONENT(delay, DelayComponent());

}  // namespace vstack
