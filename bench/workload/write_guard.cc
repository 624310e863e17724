// The write guard of vstack bench (write_guard.h): which user-named stacks a run may write into.
#include "bench/workload/write_guard.h"

#include <unistd.h>

#include "lib/spec.h"

namespace vstack::bench {

Status GuardWrites(const WriteIntent& intent, StackPlan* p) {
  auto parts = ParseSpec(p->spec);
  if (!parts || parts->empty() || p->spec.find("{dir}") != std::string::npos) return OkStatus();
  const SpecPart& bottom = parts->back();
  if (bottom.name == "memory" || bottom.name == "null") return OkStatus();
  bool create = false;
  for (const SpecOption& opt : bottom.options) create |= opt.key == "create" && opt.value == "on";
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
