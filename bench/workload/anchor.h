// An anchor is an outside tool (qemu-img bench, fio) run in the same rounds as vstack, on the
// same image files with matching knobs, so vstack's numbers can be read as ratios against a
// known reference measured under the same machine conditions. The matrix runs each anchor beside
// the stack it applies to in every round: after it in even rounds, before it in odd ones. An anchor's run is bounded in time (about
// vstack's window), so a tool 10x slower does not turn a round into minutes; the I/O count each
// side did is reported. Implementations live in bench/anchors/
#ifndef VSTACK_BENCH_WORKLOAD_ANCHOR_H_
#define VSTACK_BENCH_WORKLOAD_ANCHOR_H_

#include <atomic>
#include <functional>
#include <string>

#include "bench/workload/knobs.h"
#include "bench/workload/run_result.h"
#include "bench/workload/stack_plan.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

struct AnchorJob {
  const StackPlan* plan = nullptr;
  WorkloadKnobs knobs;           // this round's knobs (seed included)
  std::string image;             // the image file vstack runs on (closed now)
  std::string scratch_dir;       // for the anchor's own files; removed with the run
  // For fresh plans: writes an image identical to the one vstack started from at `path`.
  std::function<Status(const std::string& path)> make_fresh_image;
  // vstack's run in this round; in a round where the anchor goes first, the previous round's.
  const RunResult* vstack = nullptr;
  const std::atomic<bool>* stop = nullptr;
};

struct AnchorResult {
  std::string command;    // what was run, for the report
  double seconds = 0;     // the tool's measured time
  uint64_t ios = 0;
  double iops = 0;
  double mib_s = 0;       // MiB (2^20 bytes) per second
  double p50_us = -1;     // < 0: the tool does not report it
  double p99_us = -1;
  double cpu_s = -1;      // the tool's own CPU (user + system); < 0 unknown
  bool capped = false;    // the tool did fewer I/Os than vstack, to bound its time
  std::string note;       // how the knobs were matched, where they could not be
};

class Anchor {
 public:
  virtual ~Anchor() = default;
  virtual std::string name() const = 0;  // "qemu-img bench", "fio"
  // True if this anchor runs beside `plan` in every round.
  virtual bool AppliesTo(const StackPlan& plan) const = 0;
  // Runs the tool once. Errors say what failed (the tool missing, its exit status and output).
  virtual Result<AnchorResult> Run(const AnchorJob& job) = 0;
};

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_ANCHOR_H_
