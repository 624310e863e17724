// A bench report as flat records, one per stack per round, for tables and data frames (the
// Python module's BenchResult.records() and to_pandas()): each round's own figures and its
// ratios to the baseline's round of the same number, the pairs the summary's intervals are made
// from (bench/workload/summary.h).
#ifndef VSTACK_BENCH_REPORT_RECORDS_H_
#define VSTACK_BENCH_REPORT_RECORDS_H_

#include <string>

#include "bench/report/bench.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

// An array of objects, in the report's stack order, each stack's rounds in order, with the keys
// stack, spec, round (from 1), baseline, measured (the round did I/O), interrupted, error,
// seconds, ios, iops, read_iops, write_iops, mib_s, mean_us, p50_us, p99_us, p99.9_us,
// cpu_us_per_io, iops_per_cpu_s, process_cpu_pct, others_cpu_pct, host_ready_pct (null when
// unknown), and iops_vs_base, cpu_per_io_vs_base, efficiency_vs_base, p99_vs_base (null when the
// baseline has no measured round of that number or this round did no I/O; 0 when either side's
// figure is 0, as in the summary).
// Returned as JSON text (an array), so that nlohmann-json stays inside the library.
std::string BenchRecords(const BenchReport& r);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_REPORT_RECORDS_H_
