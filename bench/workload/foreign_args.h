// `vstack bench --diskspd "ARGS"` and `--fio-job FILE`: a diskspd command line or a fio job file
// translated to vstack bench's knobs, so that a preset's own command line runs the workload it
// runs there. Every option is translated, accepted with a note (it changes nothing vstack
// measures), or refused by name because vstack bench has no equivalent; and every knob the
// command leaves out takes that tool's own default (docs/bench.md has the table, with the
// source of each default), never vstack bench's.
#ifndef VSTACK_BENCH_WORKLOAD_FOREIGN_ARGS_H_
#define VSTACK_BENCH_WORKLOAD_FOREIGN_ARGS_H_

#include <string>
#include <vector>

#include "lib/errors.h"

namespace vstack::bench {

// Where a translated knob's value comes from.
enum class KnobSource {
  kGiven,        // the command line or job file set it
  kToolDefault,  // the command leaves it out: the tool's own default
  kVstack,       // the tool has no equivalent setting (fio without runtime= or size=): vstack's
};

struct ForeignKnob {
  std::string flag;   // vstack bench's option, with its dashes: "--bs"
  std::string value;  // as the option takes it: "64K"
  KnobSource source = KnobSource::kGiven;
};

struct ForeignArgs {
  std::string tool;  // "diskspd" or "fio"
  // Every workload knob the tool defines, once each, in vstack bench's order (--bs, --write-pct,
  // --pattern, --qd, --threads, --duration or --ios, --warmup, --size, --direct, --content,
  // --distribution, --flush-interval, ...). --seed only when the command gives one: the tools'
  // own random sequences cannot be reproduced, so a default seed would be a number only.
  std::vector<ForeignKnob> knobs;
  // Targets (files) the workload runs on, as given.
  std::vector<std::string> targets;
  // Options accepted without a knob, and what a knob cannot carry, each with why ("-L: latency
  // is always measured").
  std::vector<std::string> notes;
};

// diskspd's parameters, e.g. "-b8K -d300 -o8 -t4 -r -w50 -L testfile.dat".
Result<ForeignArgs> TranslateDiskspd(const std::string& args);

// A fio job file's text: [global] and at most one job section.
Result<ForeignArgs> TranslateFioJob(const std::string& text);

// The flags that set the same thing as `flag`: {"--duration", "--ios"} (the measured window) for
// either of them, else {flag}. A knob typed on the command line replaces every translated knob
// of its group.
std::vector<std::string> KnobGroup(const std::string& flag);

// The knobs of `source` as options: "--bs 8K --duration 300s" (empty if none).
std::string KnobsText(const ForeignArgs& a, KnobSource source);

// What the command runs as, for stderr: "--bs 8K --duration 300s --stack t.dat; diskspd's
// defaults for what it leaves out: --warmup 5s --direct off ...; vstack's own (diskspd has no
// such setting): ...". `stacks` are the --stack options the targets became ("" if none).
std::string TranslationText(const ForeignArgs& a, const std::string& stacks);

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_FOREIGN_ARGS_H_
