// `vstack bench` as one library call: the knobs in, the report out, with every number and the
// JSON document `vstack bench --output=json` prints. Nothing is printed. The command line runs
// its benchmarks through Benchmark(), so a program (or the Python module's vstack.bench()) that
// calls it with the same knobs gets the same document, up to the timing noise of a new run.
//
// Threading: Benchmark() runs on the calling thread (the workload's threads are its own) and
// may be called from several threads at once for unrelated knobs; BenchRunHooks::stop may be set
// from any thread or a signal handler.
#ifndef VSTACK_BENCH_REPORT_BENCH_H_
#define VSTACK_BENCH_REPORT_BENCH_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "bench/workload/bench_knobs.h"
#include "bench/workload/matrix.h"
#include "bench/workload/summary.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

// What one run of the matrix measured: every round of every stack and their summary (medians,
// ratios against the baseline with 95% intervals, attribution). Every report is made from it.
struct BenchReport {
  std::string command;  // the command line the reports show
  std::string preset;   // the preset (--preset), "" if none
  MatrixResult result;
  MatrixSummary summary;
};

// How the caller follows and stops a run.
struct BenchRunHooks {
  std::string command;  // what the reports show as the command line ("" for none)
  // When set to true (from any thread, e.g. a signal handler), the current window ends where it
  // is and no more rounds run; the report is marked interrupted. May be null.
  const std::atomic<bool>* stop = nullptr;
  // Called on the running thread at each stage of each stack and round, and while it runs.
  std::function<void(const MatrixProgress&)> on_progress;
  // Called with each decision the planning makes on its own, before anything runs, also when a
  // later check then refuses the knobs ("--stack /var/tmp/d.vhd runs the stack
  // vhd+file:/var/tmp/d.vhd").
  std::function<void(const std::string&)> on_note;
};

// How a run ended: interrupted (the CLI exits 130), failed (1: the run or a stack failed, or
// nothing ran), or ok (0).
enum class BenchOutcome { kOk, kFailed, kInterrupted };

struct BenchResult {
  BenchReport report;
  BenchOutcome outcome = BenchOutcome::kOk;
  // What went wrong and the warnings, one message a line, in order: the run's error, each
  // stack's ("NAME: ERROR"), and "warning: ..." (too much noise for --precision with --rounds
  // auto; a CPU Ready sweep's host RDY% above the injected). The CLI prints them on stderr.
  std::vector<std::string> messages;
  // The document `vstack bench --output=json` prints (2-space indents): the parameters, every
  // round's results, the summary, the preset tables and the anchors (docs/bench.md, "JSON").
  std::string json;
  // The text report `vstack bench` prints (docs/bench.md, "Reading the report").
  std::string text;
};

// Checks `knobs` (PlanBench, bench_knobs.h), runs the matrix with the anchors they ask for
// (compare_qemu, compare_fio) and makes the reports. Errors are the knobs refused
// (kInvalidArgument, the command line's words naming the flag); anything that goes wrong once the
// run has started is in the result (`outcome`, `messages`), with what was measured so far.
Result<BenchResult> Benchmark(const BenchKnobs& knobs, const BenchRunHooks& hooks = {});

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_REPORT_BENCH_H_
