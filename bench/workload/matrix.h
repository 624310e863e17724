// Runs a list of stack plans in interleaved rounds (A B C ... A B C ...), so drift on a noisy
// machine hits every stack alike, with the anchors (qemu-img bench, fio) right after the stacks
// they apply to. Creates its images in a private scratch directory that is removed at the end,
// also when the run is interrupted.
#ifndef VSTACK_BENCH_WORKLOAD_MATRIX_H_
#define VSTACK_BENCH_WORKLOAD_MATRIX_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "bench/workload/anchor.h"
#include "bench/workload/knobs.h"
#include "bench/workload/run_result.h"
#include "bench/workload/runner.h"
#include "bench/workload/stack_plan.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

struct MatrixProgress {
  int round = 0;        // 0-based
  int rounds = 0;
  std::string stack;
  std::string activity;  // "preparing", "running", or the anchor's name
  Progress run;          // while running
};

struct MatrixOptions {
  WorkloadKnobs knobs;   // round r runs with seed knobs.seed + r
  int rounds = 3;
  std::string scratch_parent;  // where the scratch directory goes; "" = DefaultScratchParent()
  std::vector<StackPlan> stacks;
  std::vector<Anchor*> anchors;
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const MatrixProgress&)> on_progress;
  // Creates a plan's image (or fresh template) of `size` bytes at `path`; empty: vstack's own
  // CreateImage(plan.image_format, path, size, plan.image_options).
  std::function<Status(const StackPlan& plan, const std::string& path, uint64_t size)> create_image;
};

struct AnchorRun {
  std::string tool;
  int round = 0;
  AnchorResult result;
  std::string error;  // "" when it ran
};

struct StackOutcome {
  StackPlan plan;
  std::string spec;                // as opened (scratch directory filled in)
  std::vector<std::string> chain;  // "kind: description" of each layer, top first
  std::string skipped;             // why it did not run (missing component); "" if it ran
  std::string error;               // what stopped it (create, fill, open, I/O error)
  std::vector<RunResult> rounds;
  std::vector<AnchorRun> anchors;
};

struct MatrixResult {
  WorkloadKnobs knobs;
  int rounds_planned = 0;
  int rounds_done = 0;
  std::string scratch_dir;  // removed by the time RunMatrix returns
  std::vector<StackOutcome> stacks;
  bool interrupted = false;
  std::string error;  // a failure that stopped everything (no scratch directory)
};

// REQUIRES: ValidateKnobs(options.knobs) passed.
MatrixResult RunMatrix(const MatrixOptions& options);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_MATRIX_H_
