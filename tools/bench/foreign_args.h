// `vstack bench --diskspd "ARGS"` and `--fio-job FILE`: a diskspd command line or a fio job file
// translated to vstack bench's knobs, so that a seed's own command line runs as it is. Every
// option is either translated, accepted with a note (it changes nothing vstack measures), or
// rejected by name because vstack bench has no equivalent.
#ifndef VSTACK_TOOLS_BENCH_FOREIGN_ARGS_H_
#define VSTACK_TOOLS_BENCH_FOREIGN_ARGS_H_

#include <string>
#include <utility>
#include <vector>

#include "lib/errors.h"

namespace vstack::cli {

struct ForeignArgs {
  // vstack bench options (with their dashes) and values, in the order they were found; a later
  // entry for the same option replaces an earlier one.
  std::vector<std::pair<std::string, std::string>> knobs;
  // Targets (files) the workload runs on, as given.
  std::vector<std::string> targets;
  // Options accepted without a knob, each with why ("-L: latency is always measured").
  std::vector<std::string> notes;
};

// diskspd's parameters, e.g. "-b8K -d300 -o8 -t4 -r -w50 -L testfile.dat".
Result<ForeignArgs> TranslateDiskspd(const std::string& args);

// A fio job file's text: [global] and at most one job section.
Result<ForeignArgs> TranslateFioJob(const std::string& text);

// "--bs 8K --duration 300s ..." (the knobs, last value of each option).
std::string KnobsText(const ForeignArgs& a);

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_BENCH_FOREIGN_ARGS_H_
