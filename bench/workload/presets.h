// Presets of `vstack bench --preset NAME`: a published measurement vstack reproduces,
// with the workload of the source, the stacks that model it, and the published numbers that
// the report prints side by side with vstack's (docs/presets.md).
#ifndef VSTACK_BENCH_WORKLOAD_PRESETS_H_
#define VSTACK_BENCH_WORKLOAD_PRESETS_H_

#include <string>
#include <vector>

#include "bench/workload/knobs.h"
#include "bench/workload/stack_plan.h"
#include "lib/errors.h"

namespace vstack::bench {

// One column of the source's table: a device as measured (physical, or through the hypervisor).
struct PublishedColumn {
  double iops, read_iops, write_iops, mbps;
  double read_ms, write_ms, all_ms;  // average response times
};

// A pair of stacks whose ratio is one "relative performance" column: `guest` over `host`.
struct PresetPair {
  std::string label;  // "published LUN (5.4 ms reads)", "NVMe-like (80 us)", "memory speed"
  std::string host, guest;  // plan names
};

struct Preset {
  std::string name;
  std::string source;  // the publication, in words
  std::vector<StackPlan> stacks;
  std::vector<PresetPair> pairs;  // the first is the published one
  PublishedColumn published_host, published_guest;
  std::vector<std::string> calibration;  // "parameter <- published number", one line each
  std::string diskspd;  // the source's diskspd parameters, when it ran diskspd ("" otherwise)
};

std::vector<std::string> PresetNames();
// The preset, or an error listing the names.
Result<Preset> FindPreset(const std::string& name);
// Sets the knobs the preset's source used (block size, mix, threads, queue depth, pattern, and
// for kvm-vs-hyperv the preset's run length unless `duration_given`), and makes the preset's
// stacks for them (kvm-vs-hyperv scales its stalls to the run length: kvm_hyperv.h).
void ApplyPresetKnobs(Preset* preset, WorkloadKnobs* k, bool duration_given);

// A CPU Ready sweep: every plan once per RDY% value (values outer, plans inner), named
// "<plan> RDY <v>%", each with its own cpu_ready_pct, so the rounds interleave the values.
// `stalls` is one stall-length distribution for all values, or one per value (stalls that
// grow with the load: docs/presets.md).
std::vector<StackPlan> SweepCpuReady(const std::vector<StackPlan>& plans,
                                     const std::vector<double>& ready_pcts,
                                     const std::vector<std::string>& stalls = {});

// The published CPU Ready vs SOS_SCHEDULER_YIELD table (vSphere, SQL Server), one row per RDY%.
struct PublishedYieldRow {
  double ready_pct;
  double yields, wait_ms, max_wait_ms, signal_wait_ms, duration_s;
};
const std::vector<PublishedYieldRow>& PublishedCpuReadyTable();

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_PRESETS_H_
