// A campaign: many seeds of one or more stacks (run.h), each run isolated in a child process
// (a run that hangs, or a layer that crashes the process, is one failure of one seed, and its
// suspended threads vanish with the child), with the figures `vstack sim` prints and the
// command that replays each failure.
//
// Seeds go to the stacks in turn: seed s of a campaign over N stacks runs stacks[s % N], so a
// failure replays with `--stack STACK --seed s` alone. A campaign may first run a list of fixed
// (stack, seed) pairs (regression seeds: each found a bug once). A campaign is bounded by its
// seed count (and each run by its operation count), never by a clock: the same campaign does
// the same work on any machine.
#ifndef VSTACK_ANALYSIS_SIM_CAMPAIGN_H_
#define VSTACK_ANALYSIS_SIM_CAMPAIGN_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analysis/sim/run.h"
#include "lib/historical_bug.h"

namespace vstack::sim {

struct SeedOf {
  std::string stack;
  uint64_t seed = 0;
};

// A run's process still running after this long (wall clock) is killed: a `timeout` failure.
constexpr unsigned kRunSeconds = 600;

struct CampaignOptions {
  std::vector<std::string> stacks;  // LAYERS each; at least one
  SimOptions sim;
  uint64_t seed_from = 1;
  uint64_t seeds = 1;
  std::vector<SeedOf> fixed;    // run first
  bool isolate = true;          // each run in a child process...
  unsigned run_seconds = kRunSeconds;  // ... killed after this long (a `timeout` failure)
  uint64_t stop_after = 0;      // stop after this many failures (0: never)
  std::vector<HistoricalBug> reintroduce;  // switched on for the campaign's runs
  // Set (by a signal handler or another thread) to end the campaign after the run in progress.
  // An isolated run's child keeps the caller's signal handlers: a handler that only sets this
  // flag lets the run finish (a Ctrl-C reaches the whole process group; a run it killed would
  // count as a crash of that seed).
  const std::atomic<bool>* stop = nullptr;
};

struct CampaignFailure {
  std::string stack;
  uint64_t seed = 0;
  std::string kind;
  std::string message;
  std::string replay;  // the command that replays it
};

struct CampaignResult {
  uint64_t runs = 0;
  uint64_t ops = 0;
  uint64_t power_cuts = 0;
  uint64_t trace_hash = 0;  // of every run's trace, in order
  std::vector<CampaignFailure> failures;
  bool interrupted = false;  // `stop` ended it before every seed ran
};

// Checks every stack (parse, and one format-and-open in a simulation): an error here is the
// command line's fault (exit 2).
Status CheckStacks(const std::vector<std::string>& stacks);

// Runs the campaign; `on_run` (optional) sees each run as it ends.
CampaignResult RunCampaign(const CampaignOptions& options,
                           const std::function<void(const std::string& stack,
                                                    const RunResult& run)>& on_run = {});

// `vstack sim ...` for one seed of `stack` with these knobs.
std::string ReplayCommand(const std::string& stack, const SimOptions& options, uint64_t seed,
                          const std::vector<HistoricalBug>& reintroduce);

// A named list of stacks (`vstack sim --preset NAME`):
//  - families: vhd fixed, dynamic and differencing; vhdx; passthrough; the emulation layers
//    delay, hv, ready and error; alone and nested up to three deep (the CI campaign's);
//  - grain: dedup, zstd and crc32c, alone and with the formats, up to three deep
//    (docs/testing.md says what the simulator found in them; the CI campaign's grain run);
//  - all: both.
struct SimPreset {
  std::string name;
  std::string help;
  std::vector<std::string> stacks;
};
const std::vector<SimPreset>& SimPresets();
// The preset named `name`, or nullptr.
const SimPreset* FindSimPreset(const std::string& name);
// The regression seeds: each found a bug that is fixed (docs/testing.md).
const std::vector<SeedOf>& RegressionSeeds();

}  // namespace vstack::sim

#endif  // VSTACK_ANALYSIS_SIM_CAMPAIGN_H_
