// The run step of vstack bench (bench_run.h).
#include "bench/report/bench_run.h"

#include <memory>

#include "bench/anchors/anchors.h"
#include "bench/workload/cpu_ready_sweep.h"
#include "lib/registry.h"

namespace vstack::bench {

BenchReport RunBench(MatrixOptions o, const BenchKnobs& knobs, const BenchRunHooks& hooks) {
  std::vector<std::unique_ptr<Anchor>> anchors;
  if (knobs.compare_qemu) anchors.push_back(MakeQemuAnchor());
  if (knobs.compare_fio) anchors.push_back(MakeFioAnchor());
  for (auto& a : anchors) o.anchors.push_back(a.get());
  if (knobs.qemu_create) {
    const std::atomic<bool>* stop = hooks.stop;
    o.create_image = [stop](const StackPlan& p, const std::string& path, uint64_t size) -> Status {
      if (p.qemu_format.empty()) return CreateImage(p.image_format, path, size, p.image_options);
      return CreateWithQemuImg(p, path, size, stop);
    };
  }
  o.stop = hooks.stop;
  o.on_progress = hooks.on_progress;
  BenchReport report;
  report.result = RunMatrix(o);
  report.command = hooks.command;
  report.preset = knobs.preset;
  report.summary = Summarize(report.result);
  return report;
}

std::vector<std::string> BenchMessages(const BenchReport& r) {
  std::vector<std::string> out;
  if (!r.result.error.empty()) out.push_back(r.result.error);
  for (const StackSummary& s : r.summary.stacks) {
    if (!s.error.empty()) out.push_back(s.name + ": " + s.error);
  }
  if (const std::string w = NoiseWarning(r.summary, r.result.precision_asked);
      r.result.auto_rounds && !w.empty()) {
    out.push_back("warning: " + w);
  }
  if (const std::string w = CpuReadyWarning(r.result, r.summary); !w.empty()) {
    out.push_back("warning: " + w);
  }
  return out;
}

BenchOutcome Outcome(const BenchReport& r) {
  if (r.result.interrupted) return BenchOutcome::kInterrupted;
  if (!r.result.error.empty()) return BenchOutcome::kFailed;
  bool any_error = false, any_run = false;
  for (const StackSummary& s : r.summary.stacks) {
    any_error = any_error || !s.error.empty();
    any_run = any_run || s.runs > 0;
  }
  return any_error || !any_run ? BenchOutcome::kFailed : BenchOutcome::kOk;
}

}  // namespace vstack::bench
