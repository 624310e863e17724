// Flat records of a bench report (records.h).
#include "bench/report/records.h"

#include <map>

#include <nlohmann/json.hpp>

#include "bench/report/report.h"

namespace vstack::bench {
namespace {

using nlohmann::json;

double Ratio(double x, double base) { return x > 0 && base > 0 ? x / base : 0; }

// The baseline's measured rounds: round number -> its figures.
std::map<int, RunMetrics> BaselineRounds(const BenchReport& r) {
  std::map<int, RunMetrics> rounds;
  for (size_t i = 0; i < r.summary.stacks.size() && i < r.result.stacks.size(); ++i) {
    if (!r.summary.stacks[i].baseline) continue;
    for (const RunResult& run : r.result.stacks[i].rounds) {
      if (run.Total().ios) rounds[run.round] = Metrics(run);
    }
  }
  return rounds;
}

}  // namespace

std::string BenchRecords(const BenchReport& r) {
  const std::map<int, RunMetrics> base = BaselineRounds(r);
  json out = json::array();
  for (size_t i = 0; i < r.result.stacks.size(); ++i) {
    const StackOutcome& o = r.result.stacks[i];
    const bool baseline = i < r.summary.stacks.size() && r.summary.stacks[i].baseline;
    for (const RunResult& run : o.rounds) {
      const RunMetrics m = Metrics(run);
      const bool measured = m.ios > 0;
      json rec = {{"stack", o.plan.name},
                  {"spec", o.spec},
                  {"round", run.round + 1},
                  {"baseline", baseline},
                  {"measured", measured},
                  {"interrupted", run.interrupted},
                  {"error", run.error},
                  {"seconds", run.seconds},
                  {"ios", m.ios},
                  {"iops", m.iops},
                  {"read_iops", m.read_iops},
                  {"write_iops", m.write_iops},
                  {"mib_s", m.mib_s},
                  {"mean_us", m.mean_us},
                  {"p50_us", m.p50_us},
                  {"p99_us", m.p99_us},
                  {"p99.9_us", m.p999_us},
                  {"cpu_us_per_io", m.cpu_us_per_io},
                  {"iops_per_cpu_s", m.iops_per_cpu_s},
                  {"process_cpu_pct", m.process_cpu_pct},
                  {"others_cpu_pct", m.others_cpu_pct},
                  {"host_ready_pct", m.host_ready_pct < 0 ? json(nullptr) : json(m.host_ready_pct)}};
      const auto b = base.find(run.round);
      const bool paired = measured && b != base.end();
      auto vs = [&](double x, double y) { return paired ? json(Ratio(x, y)) : json(nullptr); };
      rec["iops_vs_base"] = vs(m.iops, paired ? b->second.iops : 0);
      rec["cpu_per_io_vs_base"] = vs(m.cpu_us_per_io, paired ? b->second.cpu_us_per_io : 0);
      rec["efficiency_vs_base"] = vs(m.iops_per_cpu_s, paired ? b->second.iops_per_cpu_s : 0);
      rec["p99_vs_base"] = vs(m.p99_us, paired ? b->second.p99_us : 0);
      out.push_back(std::move(rec));
    }
  }
  return out.dump();
}

}  // namespace vstack::bench
