// Runs one workload on one opened stack: `threads` threads, each with its own IoQueue and
// `queue_depth` requests in flight, a warm-up that is not measured, then a measured window of
// `duration_s` (or `io_count` I/Os). Latency goes into log-linear histograms per thread (fixed
// memory, never a sample list); CPU and every layer's counters are snapshotted at the window's
// edges.
//
// A run stops early, keeping what it measured, when `control.stop` becomes true (Ctrl-C: the
// result says `interrupted`) or a request fails (the result's `error` names the first failure,
// e.g. "write at offset 123456: No space left on device").
#ifndef VSTACK_BENCH_WORKLOAD_RUNNER_H_
#define VSTACK_BENCH_WORKLOAD_RUNNER_H_

#include <atomic>
#include <functional>

#include "bench/workload/knobs.h"
#include "bench/workload/run_result.h"
#include "lib/block_device.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

struct Progress {
  double elapsed_s = 0;   // since the run started (warm-up included)
  double total_s = 0;     // warm-up + duration (0 for an I/O-count run)
  bool warming_up = false;
  uint64_t ios = 0;       // measured I/Os so far
  double iops = 0;        // over the measured part so far
};

struct RunControl {
  const std::atomic<bool>* stop = nullptr;       // checked every few milliseconds
  std::function<void(const Progress&)> on_progress;  // called from the calling thread
  double progress_interval_s = 0.5;
};

// REQUIRES: ValidateKnobs(knobs) passed. Fails (before any I/O) when the knobs do not fit the
// device or a queue cannot be opened; I/O errors are reported in the result instead.
Result<RunResult> RunWorkload(BlockDevice& device, const WorkloadKnobs& knobs,
                              const RunControl& control = {});

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_RUNNER_H_
