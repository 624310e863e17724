// What `vstack bench` runs: a list of stack plans. A plan is a spec plus how its image comes to
// be (created on a temporary file, filled with data once, or made fresh for every round). The
// built-in named stacks make the default matrix; any spec string is a plan too.
//
// Specs may contain "{dir}", replaced by the run's temporary directory.
#ifndef VSTACK_BENCH_WORKLOAD_STACK_PLAN_H_
#define VSTACK_BENCH_WORKLOAD_STACK_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/workload/knobs.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

enum class Prepare {
  kAuto,   // custom specs: fill when the bottom device starts empty on every open (memory,
           // null), otherwise use the device as it is
  kFill,   // write the whole region once before the first measured run
  kFresh,  // start every round from a freshly created image (first writes allocate)
  kNone,   // use the device as it is
};
const char* PrepareName(Prepare p);
Result<Prepare> ParsePrepare(const std::string& text);

// The backend the named stacks put their image files on.
struct BackendChoice {
  std::string backend = "uring";  // "uring" or "file"
  bool direct = true;             // O_DIRECT
};

struct StackPlan {
  std::string name;           // shown in reports: "raw", "vhd-dynamic", or the spec itself
  std::string spec;           // may contain {dir}
  std::string image;          // file under {dir} this plan creates; "" = the spec brings its own
  std::string image_format;   // CreateImage format: "raw", "vhd"
  std::string image_options;  // CreateImage options, e.g. "subformat=fixed"
  double image_scale = 1.0;   // image size = target size x this (room for layer metadata)
  Prepare prepare = Prepare::kAuto;
  std::vector<std::string> components;  // every component the plan needs registered
  std::string qemu_format;    // how qemu-img opens the image ("raw", "vpc"); "" = it cannot
  bool raw_file = false;      // the spec is one file/uring backend: fio can run on its file
  std::string note;           // shown with the results
  double cpu_ready_pct = -1;  // >= 0: this plan's --cpu-ready (a sweep); -1: the knobs'
  std::string ready_stall;    // this plan's --ready-stall (a sweep); "": the knobs'
  double duration_s = -1;     // > 0: this plan's --duration (a preset's short prediction runs)
  // Differencing-VHD named stacks: `image` is the top of a chain of this many differencing levels
  // over a dynamic VHD that is created and filled once; the levels are made anew (empty) every
  // round, so reads go down the chain and first writes allocate in the top.
  int diff_levels = 0;
  bool in_default_matrix = true;
  // Open the stack read-only: a user's image that the run only reads (vstack bench writes only
  // into files it created, unless --allow-write).
  bool read_only = false;
};

// The named stacks, in default-matrix order: raw, passthrough, vhd-fixed, vhd-dynamic,
// vhd-dynamic-fresh, dedup, zstd, dedup+zstd; then, on request only, raw-fresh (a sparse raw
// file, the fair baseline for a fresh dynamic VHD), raw-copy (raw on a file of its own: the A/A
// check), vhdx-fixed, vhdx-dynamic, vhdx-dynamic-fresh,
// vhd-diff-1 and vhd-diff-8 (differencing chains of 1 and 8 levels over an allocated dynamic
// VHD) and the Ceph named stacks.
std::vector<StackPlan> NamedStacks(const BackendChoice& backend);
std::vector<StackPlan> DefaultMatrix(const BackendChoice& backend);
std::vector<std::string> NamedStackNames();

// A named stack by name, or a plan for a spec. Errors name what is wrong with the text (an unknown
// named stack, a malformed spec, an unknown layer or backend).
Result<StackPlan> ResolveStack(const std::string& text, const BackendChoice& backend);

// The knobs one round of `plan` runs with, on both sides of the round (vstack and the anchors
// beside it, whichever goes first): the round's knobs, with the plan's own (a sweep's RDY% and
// stall, its own duration) and the ramp its preparation calls for (`prepared`, auto resolved; a fresh image is
// measured from its first write: no warm-up).
WorkloadKnobs PlanKnobs(const StackPlan& plan, Prepare prepared, WorkloadKnobs round);

// The components of `plan` that are not registered in this build; empty if it can run.
std::vector<std::string> MissingComponents(const StackPlan& plan);

// `text` with every "{dir}" replaced by `dir`, and every "{size:F}" by F x `target_size`,
// rounded down to a MiB, in bytes (e.g. a layer's virtual size relative to the target region).
std::string ExpandSpec(std::string text, const std::string& dir, uint64_t target_size);

// The file a one-backend spec (file: or uring:) reads and writes, or "" for other specs.
std::string BackendFile(const std::string& spec);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_STACK_PLAN_H_
