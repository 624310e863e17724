// The report folder of `vstack bench`: report.json, report.txt, three SVG charts and an
// index.html that ties them together.
#ifndef VSTACK_TOOLS_BENCH_REPORT_DIR_H_
#define VSTACK_TOOLS_BENCH_REPORT_DIR_H_

#include <string>
#include <vector>

#include "lib/errors.h"
#include "tools/bench/report.h"

namespace vstack::cli {

// The files WriteReportDir writes, in the order index.html shows them.
const std::vector<std::string>& ReportFiles();

// Creates `dir` (and its parents) if needed and writes every report file into it, replacing
// older ones. Errors name the file that could not be written.
Status WriteReportDir(const std::string& dir, const BenchReport& report);

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_BENCH_REPORT_DIR_H_
