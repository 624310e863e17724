// Benchmark(): vstack bench as one call (bench.h), made of the plan, the run step and the
// reports.
#include "bench/report/bench.h"

#include <utility>

#include "bench/report/bench_run.h"
#include "bench/report/report.h"

namespace vstack::bench {

Result<BenchResult> Benchmark(const BenchKnobs& knobs, const BenchRunHooks& hooks) {
  std::vector<std::string> notes;
  auto planned = PlanBench(knobs, &notes);
  if (hooks.on_note) {
    for (const std::string& n : notes) hooks.on_note(n);
  }
  if (!planned) return std::move(planned).error();
  BenchResult r;
  r.report = RunBench(std::move(*planned), knobs, hooks);
  r.outcome = Outcome(r.report);
  r.messages = BenchMessages(r.report);
  r.json = RenderJson(r.report).dump(2);
  r.text = RenderText(r.report);
  return r;
}

}  // namespace vstack::bench
