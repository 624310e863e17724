// A `vstack bench` knob set from its text by its flag's name ("--qd", "8"), and the --diskspd /
// --fio-job step that sets the knobs a foreign command line translates to as if typed: the one
// place both the command line and the Python module's vstack.bench() take knobs by name, so the
// two accept, refuse and translate the same things with the same words.
#ifndef VSTACK_BENCH_WORKLOAD_KNOB_TEXT_H_
#define VSTACK_BENCH_WORKLOAD_KNOB_TEXT_H_

#include <string>
#include <vector>

#include "bench/workload/bench_knobs.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

// The flags SetKnob knows, in --help's order ("--bs", "--write-pct", ...; not --stack).
const std::vector<std::string>& KnobFlags();

// Sets the knob of `flag` (its command-line name with dashes) from `text` as typed: a number
// for a count ("8"), true|false|on|off|1|0 for a switch, comma-separated values for --cpu-ready
// and --ready-stall, the text itself for the rest (PlanBench checks it). Errors
// (kInvalidArgument) name the flag: "--qd: 'x' is not a whole number", "unknown knob '--qdd';
// did you mean `--qd`?". `knobs` is unchanged on error.
Status SetKnob(BenchKnobs* knobs, const std::string& flag, const std::string& text);

// --diskspd "ARGS" or --fio-job FILE (at most one non-empty): translates the command line or
// reads and translates the job file (bench/workload/foreign_args.h), then sets each translated
// knob as if typed, except where a flag of its group (KnobGroup) is in `typed`: typed options
// win. The targets become the stacks if `knobs` has none. Returns what it ran as, the line the
// CLI prints on stderr after "vstack bench: " ('--diskspd "-r" runs as --bs 64K ...; --duration
// as given on the command line'), "" when both are empty. Errors: a translation refused or a
// value a knob refuses (kInvalidArgument), a job file that cannot be read (kIo; EISDIR for a
// directory).
Result<std::string> ApplyForeignArgs(const std::string& diskspd, const std::string& fio_job,
                                     const std::vector<std::string>& typed, BenchKnobs* knobs);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_KNOB_TEXT_H_
