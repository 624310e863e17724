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

// Creates `dir` (and its parents) if needed and writes every report file into it, replacing
// older ones. Errors name the file that could not be written.
Status WriteReportDir(const std::string& dir, const BenchReport& report);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_REPORT_REPORT_DIR_H_
