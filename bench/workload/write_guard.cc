// The write guard of vstack bench (write_guard.h): which user-named stacks a run may write into.
#include "bench/workload/write_guard.h"

#include <unistd.h>

#include <algorithm>

#include "lib/registry.h"
#include "lib/spec.h"

namespace vstack::bench {
namespace {

// True if `path` names a file in the run's scratch folder: it starts with "{dir}/" and no
// component climbs out ("{dir}/../home/me/disk.img" is the user's file).
bool InScratch(const std::string& path) {
  if (path.rfind("{dir}/", 0) != 0) return false;
  for (size_t at = 5; at < path.size();) {
    const size_t end = std::min(path.find('/', at + 1), path.size());
    if (path.compare(at + 1, end - at - 1, "..") == 0) return false;
    at = end;
  }
  return true;
}

}  // namespace

Status GuardWrites(const WriteIntent& intent, StackPlan* p) {
  auto parts = ParseSpec(p->spec);
  if (!parts || parts->empty()) return OkStatus();
  const SpecPart& bottom = parts->back();
  if (InScratch(bottom.positional)) return OkStatus();  // the run's own: made in a new folder
  if (bottom.name == "memory" || bottom.name == "null") return OkStatus();
  // create= as the backend reads it: on, true, yes or 1 (a bad value fails the open anyway).
  const Result<bool> asked =
      OptionValues(bottom.name, bottom.positional, bottom.options, nullptr).Bool("create");
  const bool create = asked && *asked;
  const std::string& target = bottom.positional;
  if (create && !target.empty() && access(target.c_str(), F_OK) != 0) return OkStatus();
  if (intent.allow_write) return OkStatus();
  const bool fills = intent.prepare == Prepare::kFill || intent.prepare == Prepare::kFresh;
  if (intent.write_pct == 0 && !fills) {
    p->read_only = true;
    return OkStatus();
  }
  const std::string what = fills ? "--prepare " + std::string(PrepareName(intent.prepare)) +
                                       " writes all of it"
                                 : std::to_string(intent.write_pct) + "% of the requests write";
  return MakeError(Errc::kInvalidArgument,
                   "--stack " + p->name + ": the benchmark would write into '" +
                       (target.empty() ? p->spec : target) +
                       "', which it did not create (" + what +
                       "), and its data would be lost. Nothing was written. Read only with "
                       "--write-pct 0, benchmark a scratch copy (a named stack such as raw, or "
                       "{dir}/NAME,create=on,size=1G in the spec), or pass --allow-write to "
                       "overwrite it");
}

}  // namespace vstack::bench
