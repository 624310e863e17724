// Runs a list of stack plans in interleaved rounds (A B C ... A B C ...), so drift on a noisy
// machine hits every stack alike, with the anchors (qemu-img bench, fio) beside the stacks they
// apply to: right after them in even rounds (0, 2, ...), right before them in odd rounds, so a
// drift within a round favours each side equally often. Creates its images in a private scratch directory that is removed at the end,
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
  int rounds = 0;        // 0 with --rounds auto (not known in advance)
  std::string stack;
  std::string activity;  // "preparing", "running", or the anchor's name
  Progress run;          // while running
};

struct MatrixOptions {
  WorkloadKnobs knobs;   // round r runs with seed knobs.seed + r
  int rounds = 3;        // with auto_rounds: the most rounds
  // --rounds auto: after min_rounds, keep adding interleaved rounds until every stack's IOPS
  // interval against the baseline is within `precision` (a relative half-width), or until the
  // next round would end more than max_time_s after the run started, or `rounds` are done.
  bool auto_rounds = false;
  int min_rounds = 3;
  double precision = 0.02;
  double max_time_s = 120;
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
  bool interrupted = false;        // stopped (Ctrl-C) outside a round: in its fill
  // How it was prepared in fact: kAuto resolved to fill or none on the first open.
  Prepare prepared = Prepare::kAuto;
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
  std::string error;  // a failure that stopped everything (no scratch directory, bad sizes)
  // --rounds auto: what was asked and why the rounds stopped ("the precision was reached",
  // "the time budget was spent", "the most rounds were run").
  bool auto_rounds = false;
  double precision_asked = 0;
  double max_time_s = 0;
  std::string rounds_stopped;
};

// REQUIRES: ValidateKnobs(options.knobs) passed. Before the first round, CheckStackSizes; a
// failure is `error`, and nothing runs.
MatrixResult RunMatrix(const MatrixOptions& options);

// Opens every stack that brings its own device (a spec without {dir}, not a preset's image)
// read-only and checks it: its size must hold the target region (--size), so that every stack
// runs on the same region, and a layer that maps data onto the device below must have room
// for the region there. OK when all fit, else (Errc::kInvalidArgument) what does not and what
// to do; a stack whose open refuses an option's value is Errc::kBadSpec.
Status CheckStackSizes(const std::vector<StackPlan>& stacks, const WorkloadKnobs& k);

// "dedup (its data area on memory below: 62 MiB)" for the deepest layer of `top` whose writes
// failed, or "" when none did: where an out-of-space error comes from.
std::string FailingLayer(BlockDevice& top);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_MATRIX_H_
