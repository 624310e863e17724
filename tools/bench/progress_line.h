// The live progress line of `vstack bench` on stderr: "[round 2/5] vhd-dynamic  running  1.2/2.0 s
// 45,123 IOPS", rewritten in place on a terminal, one line per stage otherwise.
#ifndef VSTACK_TOOLS_BENCH_PROGRESS_LINE_H_
#define VSTACK_TOOLS_BENCH_PROGRESS_LINE_H_

#include <string>

#include "bench/workload/matrix.h"

namespace vstack::cli {

class ProgressLine {
 public:
  // A disabled line (--quiet) prints nothing.
  explicit ProgressLine(bool enabled);
  ~ProgressLine() { Clear(); }

  // Shows `p` (the matrix's progress callback).
  void Update(const bench::MatrixProgress& p);
  // Erases the line from a terminal, so the report starts on a clean line.
  void Clear();

 private:
  bool enabled_, tty_;
  bool dirty_ = false;
  std::string last_;
};

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_BENCH_PROGRESS_LINE_H_
