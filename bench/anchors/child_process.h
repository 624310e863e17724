// Runs an outside tool (qemu-img, fio) to completion: its output captured, its CPU time
// measured (wait4's rusage), and killed if the user interrupts the benchmark.
#ifndef VSTACK_BENCH_ANCHORS_CHILD_PROCESS_H_
#define VSTACK_BENCH_ANCHORS_CHILD_PROCESS_H_

#include <atomic>
#include <string>
#include <vector>

#include "lib/errors.h"

namespace vstack::bench {

struct ChildResult {
  int exit_status = -1;   // -1 if killed by a signal
  std::string output;     // stdout and stderr, interleaved
  double user_s = 0, kernel_s = 0, wall_s = 0;
  bool stopped = false;   // killed because `stop` was set
};

// Runs argv[0] (searched on PATH). Fails only if the program cannot be started.
Result<ChildResult> RunChild(const std::vector<std::string>& argv, const std::atomic<bool>* stop);

// "a 'b c'": argv as a shell would need it, for reports.
std::string ShellJoin(const std::vector<std::string>& argv);

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_ANCHORS_CHILD_PROCESS_H_
