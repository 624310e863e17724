// `vstack bench`'s knobs as text, named as its flags (--write-pct is write_pct), and the one check
// of them all: what the command line and the Python module hand to the engine, so that both
// refuse the same knobs with the same words and run the same matrix.
#ifndef VSTACK_BENCH_WORKLOAD_BENCH_KNOBS_H_
#define VSTACK_BENCH_WORKLOAD_BENCH_KNOBS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/workload/matrix.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

// Every knob of `vstack bench` with the command line's default (docs/bench.md, "Knobs"). Sizes
// and times are text as typed ("8K", "500ms"); PlanBench parses them.
struct BenchKnobs {
  std::vector<std::string> stacks;  // --stack: presets, specs or image paths; none: the default matrix
  std::string bs = "8K";
  uint32_t write_pct = 50;
  std::string pattern = "random";  // PatternNames(): random | sequential
  uint32_t qd = 8, threads = 4;
  std::string duration;             // "": 2s, or the preset's own
  uint64_t ios = 0;                // measured I/Os instead of a duration (0: timed)
  std::string warmup = "0.5s";
  std::string size = "256M";
  uint64_t seed = 1;
  std::string distribution = "uniform";  // uniform | zipf:THETA
  uint32_t flush_interval = 0;
  std::string content = "random";  // ContentNames(): random | zeros | pattern
  uint32_t dedupe_pct = 0, compress_pct = 0;
  std::string rounds;  // N or auto; "": auto for the default matrix, 3 otherwise
  std::string precision = "2%", max_time = "2m";  // --rounds auto
  bool allow_write = false;
  std::string backend = "uring", direct = "on";  // the presets' image files
  std::string prepare = "auto";                  // auto | fill | fresh | none
  std::string cpu_sampling = "on";  // on | off: the per-layer CPU sampler (docs/bench.md)
  std::string dir;     // where the scratch directory goes; "": $TMPDIR or /var/tmp
  std::string preset;  // a published finding's workload and stacks (--preset)
  // The quantum scheduler and CPU Ready (docs/presets.md). Several cpu_ready values sweep.
  std::vector<double> cpu_ready;
  std::string quantum;
  std::vector<std::string> ready_stall = {"exp:4ms"};  // one, or one per cpu_ready value
  uint32_t schedulers = 1;
  std::string task_cpu;
  std::string task_cpu_mode = "burn";  // burn | sleep
  bool exchange = false;
  // The anchors (bench/anchors), run beside the stacks by the run step, not checked here.
  bool compare_qemu = false, compare_fio = false, qemu_create = false;
};

// Checks every knob before anything is created and builds the matrix to run: the workload, the
// rounds, the stacks (the preset's, the default matrix, or each --stack resolved, a CPU Ready
// sweep expanded) and the scratch directory's parent; `anchors`, `stop`, `on_progress` and
// `create_image` are left for the run step. Errors (kInvalidArgument, a usage error) are the
// command line's words and name the flag: "--bs: 1000 is not a positive multiple of 512".
// A --stack that is a path to an existing image runs as the spec its format probe gives; each
// such decision is appended to `notes` as it is made, also when a later check fails
// ("--stack /var/tmp/d.vhd runs the stack vhd+file:/var/tmp/d.vhd").
Result<MatrixOptions> PlanBench(const BenchKnobs& knobs, std::vector<std::string>* notes = nullptr);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_BENCH_KNOBS_H_
