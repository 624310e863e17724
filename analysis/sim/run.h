// One seed of a simulation: everything it does is drawn from the seed (and the knobs), so the
// seed alone replays it. A run:
//
//  1. draws its shape: the disk's traits and timing, the layers' variations (sim_stack.h), 1 to
//     `queues` simulated threads with a queue depth each, the mix of requests and where they go,
//     whether it injects I/O errors, fills its disk (ENOSPC), and how many power cuts it takes;
//  2. formats and opens the stack (on a simulated thread);
//  3. runs the workload (workload.h) in epochs; an epoch that ends in a power cut stops at a
//     seeded instant, keeps what the disk's power-cut rule keeps (sim_disk.h), lets the old
//     stack wind down on the old disk, then reopens the stack on what was kept, checks every
//     layer (`Check`: no corruption) and reads every unit back against the model (data flushed
//     before the cut reads back; other units hold old or new data, never other bytes);
//  4. closes the stack, reopens it, checks it and reads everything back exactly.
// The first failure ends the run: what it found, and the trace of the run so far.
#ifndef VSTACK_ANALYSIS_SIM_RUN_H_
#define VSTACK_ANALYSIS_SIM_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/sim/sim_stack.h"
#include "analysis/sim/workload.h"

namespace vstack::sim {

// The knobs of `vstack sim` (the fault rates are per run or per request, as named).
// The most --ops a run takes: a run's process has 10 minutes of wall clock (campaign.h), and
// a million requests take from half a minute (the normal build) to several (a sanitizer's).
constexpr uint64_t kMaxSimOps = 1'000'000;

struct SimOptions {
  // Workload requests per run (maps included), shared among its epochs: a run without power
  // cuts or failures completes them all; a cut ends its epoch early (what is in flight or not
  // yet submitted is not done).
  uint64_t ops = 300;
  uint32_t queues = 4;        // simulated threads, at most
  uint32_t depth = 8;         // queue depth, at most
  double fault_runs = 0.25;   // share of runs that inject I/O errors...
  double eio_rate = 0.01;     // ... on this share of their requests
  double crash_runs = 0.5;    // share of runs with power cuts (1 to 3)
  double land_rate = 0.5;     // a volatile write survives a power cut
  double torn_rate = 0.3;     // ... as a prefix of its sectors
  double enospc_runs = 0.1;   // share of runs whose disk fills up
};

struct RunResult {
  uint64_t seed = 0;
  uint64_t ops = 0;  // workload requests completed (maps included), failed run or not
  uint64_t power_cuts = 0;
  uint64_t trace_hash = 0;  // every decision and result of the run
  std::vector<SimFailure> failures;
};

// Runs seed `seed` of `stack` (parsed by SimStack::Parse). In-process: a run that hangs
// leaves its stack and threads allocated for good (the campaign isolates each run in a child
// process instead; campaign.h).
RunResult RunSeed(const SimStack& stack, const SimOptions& options, uint64_t seed);

}  // namespace vstack::sim

#endif  // VSTACK_ANALYSIS_SIM_RUN_H_
