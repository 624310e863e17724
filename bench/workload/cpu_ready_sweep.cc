// The figures of a --cpu-ready run (cpu_ready_sweep.h).
#include "bench/workload/cpu_ready_sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/workload/presets.h"

namespace vstack::bench {

std::vector<const StackSummary*> SchedulerRows(const MatrixResult& m, const MatrixSummary& s) {
  std::vector<const StackSummary*> rows;
  if (m.knobs.quantum_ns == 0) return rows;
  for (const StackSummary& stack : s.stacks) {
    if (stack.runs > 0) rows.push_back(&stack);
  }
  return rows;
}

double MedianWindowSeconds(const MatrixResult& m, const std::string& stack) {
  for (const StackOutcome& o : m.stacks) {
    if (o.plan.name != stack) continue;
    std::vector<double> v;
    for (const RunResult& run : o.rounds) {
      if (run.Total().ios) v.push_back(run.seconds);
    }
    return SpreadOf(v).median;
  }
  return 0;
}

std::vector<CpuReadyGrowth> CpuReadyGrowthRows(const MatrixResult& m, const MatrixSummary& s) {
  const auto rows = SchedulerRows(m, s);
  if (rows.size() < 2) return {};
  auto times = [](double a, double base) { return base > 0 ? a / base : std::nan(""); };
  const StackSummary* b = rows.front();
  const double b_seconds = MedianWindowSeconds(m, b->name);
  const auto& pub = PublishedCpuReadyTable();
  std::vector<CpuReadyGrowth> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const StackSummary* row = rows[i];
    CpuReadyGrowth g;
    g.ready_pct = row->cpu_ready_pct;
    g.yields_x = times(row->yields, b->yields);
    g.wait_x = times(row->yield_wait_ms, b->yield_wait_ms);
    g.duration_x = times(MedianWindowSeconds(m, row->name), b_seconds);
    if (i < pub.size()) {
      g.has_published = true;
      g.published_ready_pct = pub[i].ready_pct;
      g.published_yields_x = pub[i].yields / pub[0].yields;
      g.published_wait_x = pub[i].wait_ms / pub[0].wait_ms;
      g.published_duration_x = pub[i].duration_s / pub[0].duration_s;
    }
    out.push_back(g);
  }
  return out;
}

std::string CpuReadyWarning(const MatrixResult& m, const MatrixSummary& s) {
  const auto rows = SchedulerRows(m, s);
  if (rows.size() < 2) return "";
  double host = -1, injected = INFINITY;
  for (const StackSummary* row : rows) {
    host = std::max(host, row->host_ready_pct);
    if (row->ready_stalled_pct > 0) injected = std::min(injected, row->ready_stalled_pct);
  }
  if (host < 0 || !std::isfinite(injected) || host <= injected) return "";
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "the host's own CPU Ready (%.2f%%) exceeds the injected %.2f%%: the sweep's "
                "ratios are not the injected stalls'",
                host, injected);
  return buf;
}

}  // namespace vstack::bench
