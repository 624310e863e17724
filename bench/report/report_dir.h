// The report folder of `vstack bench`: report.json, report.txt, three SVG charts and an
// index.html that ties them together.
#ifndef VSTACK_BENCH_REPORT_REPORT_DIR_H_
#define VSTACK_BENCH_REPORT_REPORT_DIR_H_

#include <string>
#include <vector>

#include "bench/report/bench.h"
#include "lib/export.h"
#include "lib/errors.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

// The files WriteReportDir writes, in the order index.html shows them.
const std::vector<std::string>& ReportFiles();

// Creates `dir` (and its parents) if needed and checks that a file can be written in it: what
// a run calls before it measures anything, so that a folder it cannot write fails at once. A
// path holding a NUL byte is refused (Errc::kInvalidArgument, RefuseNul in lib/spec.h).
Status PrepareReportDir(const std::string& dir);

// PrepareReportDir, then writes every report file into `dir`, each under a temporary name
// renamed over the old one (a reader never sees half a file), and removes an earlier run's
// chart that this report has not. Errors name the file that could not be written.
Status WriteReportDir(const std::string& dir, const BenchReport& report);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_REPORT_REPORT_DIR_H_
