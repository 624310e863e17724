// vstack sim --stack LAYERS [--seed N | --seed-from N --seeds K] [knobs] [--output=json]:
// deterministic simulation of a stack (docs/testing.md). The simulator (analysis/sim) puts
// LAYERS over simulated disks, drives every queue from one seeded scheduler with injected
// errors, torn writes and power cuts, and checks every read, every reopen and every `Check`
// against a model of what the layers promise. One seed replays one run exactly. Exit status: 0
// nothing failed, 1 something failed (each failure prints the command that replays it), 2 usage
// error, 130 interrupted (Ctrl-C: the runs done are summarised). This file parses the flags and
// prints.
#include <fmt/format.h>

#include <random>

#include "analysis/sim/campaign.h"
#include "tools/command.h"
#include "tools/interrupt.h"
#include "tools/output.h"
#include "tools/usage.h"

namespace vstack::cli {
namespace {

struct SimArgs {
  std::vector<std::string> stacks;
  std::string preset;
  uint64_t seed = 0;
  std::string seed_from = "1";
  uint64_t seeds = 0;
  bool regressions = false;
  bool no_isolate = false;
  uint64_t stop_after = 0;
  std::vector<std::string> reintroduce;
  sim::SimOptions knobs;
  OutputFormat output = OutputFormat::kText;
};

std::string Hex(uint64_t v) { return fmt::format("{:016x}", v); }

void CheckRate(const char* flag, double v) {
  if (!(v >= 0 && v <= 1)) FailUsage("sim", fmt::format("{}: {} is not a rate from 0 to 1", flag, v));
}

// The seeds of --seed-from and --seeds end at 2^64 - 1 (they wrapped to 0): a range past it is
// refused, and a random first seed is drawn low enough.
void CheckSeedRange(bool random, sim::CampaignOptions& o) {
  if (o.seeds == 0 || o.seeds - 1 <= UINT64_MAX - o.seed_from) return;
  if (random) {
    o.seed_from = UINT64_MAX - (o.seeds - 1);
    return;
  }
  FailUsage("sim", fmt::format("--seed-from {} --seeds {}: the seeds would pass {} (2^64 - 1, the "
                               "last seed); from {}, --seeds {} at most",
                               o.seed_from, o.seeds, UINT64_MAX, o.seed_from,
                               UINT64_MAX - o.seed_from + 1));
}

sim::CampaignOptions BuildOptions(CLI::App& cmd, SimArgs& a) {
  sim::CampaignOptions o;
  o.stacks = a.stacks;
  if (const sim::SimPreset* p = sim::FindSimPreset(a.preset)) {
    o.stacks.insert(o.stacks.end(), p->stacks.begin(), p->stacks.end());
  }
  if (o.stacks.empty()) FailUsage("sim", "name the layers to simulate: --stack LAYERS (or --preset families)");
  const bool one = cmd.count("--seed") > 0;
  if (one && (cmd.count("--seed-from") > 0 || cmd.count("--seeds") > 0)) {
    FailUsage("sim", "--seed runs one seed; --seed-from and --seeds run several: not both");
  }
  if (one) {
    o.seed_from = a.seed;
    o.seeds = 1;
  } else {
    if (a.seed_from == "random") {
      o.seed_from = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
    } else {
      try {
        size_t used = 0;
        o.seed_from = std::stoull(a.seed_from, &used);
        if (used != a.seed_from.size() || a.seed_from[0] < '0' || a.seed_from[0] > '9') {
          throw std::invalid_argument(a.seed_from);  // stoull takes "-1" as 2^64 - 1
        }
      } catch (const std::exception&) {
        FailUsage("sim", "--seed-from: '" + a.seed_from + "' is not a number or `random`");
      }
    }
    o.seeds = cmd.count("--seeds") > 0 ? a.seeds : (a.regressions ? 0 : 1);
    CheckSeedRange(a.seed_from == "random", o);
  }
  if (a.regressions) o.fixed = sim::RegressionSeeds();
  o.sim = a.knobs;
  if (o.sim.ops == 0 || o.sim.ops > sim::kMaxSimOps) {
    FailUsage("sim", fmt::format("--ops: 1 to {} (a run has {} s of wall clock)", sim::kMaxSimOps,
                                 sim::kRunSeconds));
  }
  if (o.sim.queues == 0 || o.sim.queues > 16) FailUsage("sim", "--queues: 1 to 16");
  if (o.sim.depth == 0 || o.sim.depth > 64) FailUsage("sim", "--depth: 1 to 64");
  CheckRate("--fault-runs", o.sim.fault_runs);
  CheckRate("--eio-rate", o.sim.eio_rate);
  CheckRate("--crash-runs", o.sim.crash_runs);
  CheckRate("--land-rate", o.sim.land_rate);
  CheckRate("--torn-rate", o.sim.torn_rate);
  CheckRate("--enospc-runs", o.sim.enospc_runs);
  for (const std::string& name : a.reintroduce) {
    for (const HistoricalBugName& n : kHistoricalBugNames) {
      if (name == n.name) o.reintroduce.push_back(n.bug);
    }
  }
  o.isolate = !a.no_isolate;
  o.stop_after = a.stop_after;
  if (Status s = sim::CheckStacks(o.stacks); !s) FailUsage("sim", s.error().message);
  return o;
}

void Print(const sim::CampaignOptions& o, const sim::CampaignResult& r, OutputFormat output) {
  if (output == OutputFormat::kJson) {
    nlohmann::json failures = nlohmann::json::array();
    for (const sim::CampaignFailure& f : r.failures) {
      failures.push_back({{"seed", f.seed}, {"stack", f.stack}, {"kind", f.kind},
                          {"message", f.message}, {"replay", f.replay}});
    }
    nlohmann::json j = {{"runs", r.runs},
                        {"ops", r.ops},
                        {"interrupted", r.interrupted},
                        {"power_cuts", r.power_cuts},
                        {"failures", failures},
                        {"trace_hash", Hex(r.trace_hash)},
                        {"stacks", o.stacks},
                        {"seed_from", o.seed_from}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  for (const sim::CampaignFailure& f : r.failures) {
    fmt::print("FAIL seed {} of {}: {}: {}\n  replay: {}\n", f.seed, f.stack, f.kind, f.message,
               f.replay);
  }
  if (r.interrupted) {
    fmt::print("interrupted: {} of {} run(s) done\n", r.runs, o.fixed.size() + o.seeds);
  }
  fmt::print(
      "{} run(s) of {} stack(s) from seed {}: {} operations completed, {} power cut(s), {} "
      "failure(s)\n",
      r.runs, o.stacks.size(), o.seed_from, r.ops, r.power_cuts, r.failures.size());
  fmt::print("trace_hash {}\n", Hex(r.trace_hash));
}

}  // namespace

void AddSimCommand(CLI::App& app) {
  auto a = std::make_shared<SimArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sim", "Deterministic simulation: seeded schedules, errors, torn writes and power cuts "
             "over LAYERS, every result checked (exit 1 on a failure)");
  cmd->add_option("--stack", a->stacks,
                  "layers over the simulated disk, e.g. dedup+vhd:subformat=dynamic "
                  "(vhd:subformat=fixed|dynamic|diff, vhdx); repeat for several");
  std::vector<std::string> presets;
  std::string preset_help = "a named list of stacks:";
  for (const sim::SimPreset& p : sim::SimPresets()) {
    presets.push_back(p.name);
    preset_help += " " + p.name + " (" + p.help + ");";
  }
  preset_help.pop_back();
  Choices(cmd->add_option("--preset", a->preset, preset_help), presets);
  WholeNumber(cmd->add_option("--seed", a->seed, "run this one seed"));
  cmd->add_option("--seed-from", a->seed_from, "first seed of --seeds (or `random`)");
  WholeNumber(cmd->add_option("--seeds", a->seeds, "how many seeds to run"));
  cmd->add_flag("--regressions", a->regressions, "first run the regression seeds (docs/testing.md)");
  cmd->add_option("--ops", a->knobs.ops,
                  "workload requests per run; a power cut ends its share early (the summary "
                  "counts those that completed)")
      ->capture_default_str();
  cmd->add_option("--queues", a->knobs.queues, "simulated threads per run, at most")->capture_default_str();
  cmd->add_option("--depth", a->knobs.depth, "queue depth, at most")->capture_default_str();
  cmd->add_option("--fault-runs", a->knobs.fault_runs, "share of runs that inject I/O errors")->capture_default_str();
  cmd->add_option("--eio-rate", a->knobs.eio_rate, "share of their requests that fail (EIO)")->capture_default_str();
  cmd->add_option("--crash-runs", a->knobs.crash_runs, "share of runs with power cuts (1 to 3)")->capture_default_str();
  cmd->add_option("--land-rate", a->knobs.land_rate, "a write not yet durable survives a power cut")->capture_default_str();
  cmd->add_option("--torn-rate", a->knobs.torn_rate, "... as a prefix of its sectors")->capture_default_str();
  cmd->add_option("--enospc-runs", a->knobs.enospc_runs, "share of runs whose disk fills up")->capture_default_str();
  std::vector<std::string> bugs;
  for (const HistoricalBugName& n : kHistoricalBugNames) bugs.push_back(n.name);
  Choices(cmd->add_option("--reintroduce", a->reintroduce,
                          "switch a fixed bug back on (to see the simulator find it)"),
          bugs);
  WholeNumber(cmd->add_option("--stop-after", a->stop_after, "stop after this many failures (0: never)"));
  cmd->add_flag("--no-isolate", a->no_isolate,
                "run every seed in this process (debugging; a hang then leaks its run)");
  AddOutputOption(cmd, &a->output);
  cmd->callback([cmd, a] {
    sim::CampaignOptions o = BuildOptions(*cmd, *a);
    // Ctrl-C ends the campaign after the run in progress, with the summary of the runs done
    // (and their failures' replay commands); the exit status is then 130.
    InterruptScope interrupt;
    o.stop = &InterruptScope::stop();
    const sim::CampaignResult r = sim::RunCampaign(o);
    Print(o, r, a->output);
    if (!r.failures.empty()) Exit(kExitError);
    if (r.interrupted) Exit(130);
  });
}

}  // namespace vstack::cli
