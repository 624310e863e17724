// vstack bench writes only into files it creates (docs/bench.md, issue 11): the check that a stack
// the user names is opened read-only when the run only reads, and refused when the run would
// write into data it did not create, unless --allow-write.
#ifndef VSTACK_BENCH_WORKLOAD_WRITE_GUARD_H_
#define VSTACK_BENCH_WORKLOAD_WRITE_GUARD_H_

#include <cstdint>
#include <string>

#include "bench/workload/stack_plan.h"
#include "lib/errors.h"

namespace vstack::bench {

// What the run will do to every stack.
struct WriteIntent {
  uint32_t write_pct = 0;           // share of the requests that write
  Prepare prepare = Prepare::kAuto;  // --prepare: fill and fresh write all of the region
  bool allow_write = false;         // --allow-write: the user takes the risk
};

// For a plan from a user's --stack (not a preset): one whose bottom device keeps data (a file,
// an RBD image...) and is not a file this run creates (create=on for a path that does not exist
// yet; memory, null and files under {dir}, the run's new scratch folder, are the run's own;
// a {dir} path that climbs out with ".." is not) is set read-only when the run only reads,
// and refused (kInvalidArgument, the message says what to do) when it would write.
Status GuardWrites(const WriteIntent& intent, StackPlan* plan);

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_WRITE_GUARD_H_
