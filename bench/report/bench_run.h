// The run step of `vstack bench` as a library call, after PlanBench (bench/workload/bench_knobs.h):
// the anchors the knobs ask for beside the stacks, the interleaved rounds with a progress callback
// and a stop flag, and the BenchReport every renderer takes; then what the command line says on
// stderr about it and how it ends. Benchmark() (bench.h), the one call the CLI and the Python
// module make, is made of these.
#ifndef VSTACK_BENCH_REPORT_BENCH_RUN_H_
#define VSTACK_BENCH_REPORT_BENCH_RUN_H_

#include <string>
#include <vector>

#include "bench/report/bench.h"
#include "bench/workload/bench_knobs.h"
#include "bench/workload/matrix.h"

namespace vstack::bench {

// Runs `planned` (PlanBench of `knobs`) with the anchors `knobs` asks for (compare_qemu,
// compare_fio; qemu_create makes the images qemu can open with qemu-img) and summarizes it.
// Never fails as a call: what went wrong is in the report (a stack's or the run's error).
BenchReport RunBench(MatrixOptions planned, const BenchKnobs& knobs, const BenchRunHooks& hooks);

// What the command line prints on stderr after the report, one message a line, in order: the
// run's error, each stack's ("NAME: ERROR"), and the warnings ("warning: ..."): too much noise
// for the precision asked (--rounds auto), a CPU Ready sweep's host RDY% above the injected.
std::vector<std::string> BenchMessages(const BenchReport& r);

// How the run of `r` ended.
BenchOutcome Outcome(const BenchReport& r);

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_REPORT_BENCH_RUN_H_
