#include "bench/workload/seed_presets.h"

#include <cstdio>

namespace vstack::bench {
namespace {

StackPlan Plan(std::string name, std::string spec, std::string note) {
  StackPlan p;
  p.name = std::move(name);
  p.spec = std::move(spec);
  p.prepare = Prepare::kNone;  // null below: nothing to fill
  p.note = std::move(note);
  for (size_t start = 0;;) {
    const size_t plus = p.spec.find('+', start);
    const std::string part = p.spec.substr(start, plus == std::string::npos ? plus : plus - start);
    p.components.push_back(part.substr(0, part.find(':')));
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  return p;
}

SeedPreset HypervPassthrough() {
  SeedPreset s;
  s.name = "hyperv-passthrough";
  s.source =
      "IOMeter on Hyper-V, passthrough disk vs the same physical disk: 2 KiB, 66% reads / 33% "
      "writes, 1 outstanding I/O per worker, 10 min after a 30 s ramp";
  // The physical LUN: the published physical average response times as service times.
  const std::string lun = "delay:read=5.4066ms,write=254.4us+null:1G";
  const std::string nvme = "delay:latency=80us+null:1G";
  const std::string hv = "hv:preset=hyperv-passthrough+";
  s.stacks = {
      Plan("physical", lun, "the published LUN: physical response times as service times"),
      Plan("passthrough", hv + lun, "the same LUN under hv: (published passthrough overhead)"),
      Plan("nvme", nvme, "prediction: an NVMe-like device, 80 us per request"),
      Plan("nvme+hv", hv + nvme, "prediction: the same hv: cost on it"),
      Plan("memory", "null:1G", "prediction: memory speed"),
      Plan("memory+hv", hv + "null:1G", "prediction: the same hv: cost at memory speed"),
  };
  s.pairs = {{"published LUN", "physical", "passthrough"},
             {"NVMe-like, 80 us", "nvme", "nvme+hv"},
             {"memory speed", "memory", "memory+hv"}};
  s.published_host = {269.73, 180.73, 89.00, 0.5524, 5.4066, 0.2544, 3.7066};
  s.published_guest = {250.47, 167.60, 82.87, 0.5130, 5.7797, 0.3716, 3.9904};
  s.calibration = {
      "delay: read=5.4066ms    <- physical average read response time 5.4066 ms",
      "delay: write=254.4us    <- physical average write response time 0.2544 ms",
      "hv: cpu=10us            <- not published per I/O (the source gives 9-12% guest CPU "
      "overhead); an assumption",
      "hv: read=363.1us        <- passthrough minus physical read time, less the CPU: "
      "5.7797 - 5.4066 ms - 10 us",
      "hv: write=107.2us       <- passthrough minus physical write time, less the CPU: "
      "0.3716 - 0.2544 ms - 10 us",
      "   (with the CPU, their 66/33 mix adds 0.284 ms = 3.9904 - 3.7066 ms, the published "
      "~0.28 ms average; one cost for both could not give both ratios)",
      "--bs 2K --write-pct 33  <- 2 KiB, 66% reads / 33% writes",
      "--threads 1 --qd 1      <- Little's law on the published table: 269.73 IOPS x 3.7066 ms "
      "= 1.00 I/O in flight, so one request at a time reached the disk (the text says 4 "
      "workers x 1 outstanding; with 4 in flight the IOPS would be ~4x for the same times)",
  };
  return s;
}

}  // namespace

std::vector<std::string> SeedPresetNames() { return {"hyperv-passthrough"}; }

Result<SeedPreset> FindSeedPreset(const std::string& name) {
  if (name == "hyperv-passthrough") return HypervPassthrough();
  std::string names;
  for (const std::string& n : SeedPresetNames()) names += (names.empty() ? "" : ", ") + n;
  return MakeError(Errc::kInvalidArgument,
                   "--preset: '" + name + "' is not a seed preset (presets: " + names + ")");
}

void ApplySeedKnobs(const SeedPreset& preset, WorkloadKnobs* k) {
  if (preset.name == "hyperv-passthrough") {
    k->block_size = 2048;
    k->write_pct = 33;
    k->threads = 1;
    k->queue_depth = 1;
    k->pattern = AccessPattern::kRandom;
    k->distribution = Distribution::kUniform;
  }
}

std::vector<StackPlan> SweepCpuReady(const std::vector<StackPlan>& plans,
                                     const std::vector<double>& ready_pcts,
                                     const std::vector<std::string>& stalls) {
  std::vector<StackPlan> out;
  for (size_t i = 0; i < ready_pcts.size(); ++i) {
    const double v = ready_pcts[i];
    for (const StackPlan& p : plans) {
      StackPlan q = p;
      char buf[32];
      std::snprintf(buf, sizeof buf, " RDY %g%%", v);
      q.name += buf;
      q.cpu_ready_pct = v;
      if (stalls.size() == ready_pcts.size()) q.ready_stall = stalls[i];
      out.push_back(std::move(q));
    }
  }
  return out;
}

const std::vector<PublishedYieldRow>& PublishedCpuReadyTable() {
  // vSphere, SQL Server parallel workload, neighbours loaded with CPU-bound work:
  // sys.dm_os_wait_stats for SOS_SCHEDULER_YIELD.
  static const std::vector<PublishedYieldRow> rows = {
      {1.2, 1392, 974, 12, 963, 92},
      {5.1, 2514, 3618, 62, 3608, 117},
      {28.4, 10455, 22893, 124, 22803, 239},
  };
  return rows;
}

}  // namespace vstack::bench
