#include "bench/workload/run_result.h"

#include <algorithm>
#include <cmath>

namespace vstack::bench {

void OpTotals::Merge(const OpTotals& o) {
  ios += o.ios;
  bytes += o.bytes;
  errors += o.errors;
  latency.Merge(o.latency);
}

OpTotals ThreadResult::Total() const {
  OpTotals t = read;
  t.Merge(write);
  return t;
}

WindowHistogram WindowHistogram::Between(const LatencyHistogram& before,
                                         const LatencyHistogram& after) {
  WindowHistogram w;
  if (after.count() == before.count()) return w;
  w.counts.resize(LatencyHistogram::kBuckets);
  for (int b = 0; b < LatencyHistogram::kBuckets; ++b) {
    const uint64_t a = after.bucket_count(b), z = before.bucket_count(b);
    w.counts[b] = a > z ? a - z : 0;
    w.total += w.counts[b];
  }
  return w;
}

void WindowHistogram::Merge(const WindowHistogram& o) {
  if (o.total == 0) return;
  if (counts.empty()) counts.resize(LatencyHistogram::kBuckets);
  for (size_t b = 0; b < o.counts.size(); ++b) counts[b] += o.counts[b];
  total += o.total;
}

double WindowHistogram::Percentile(double p) const {
  if (total == 0) return 0;
  const uint64_t rank = std::clamp<uint64_t>(
      static_cast<uint64_t>(std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * double(total))), 1, total);
  uint64_t seen = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    seen += counts[b];
    if (seen >= rank) {
      const int i = static_cast<int>(b);
      return double(LatencyHistogram::BucketLow(i)) + double(LatencyHistogram::BucketWidth(i)) / 2;
    }
  }
  return 0;
}

uint64_t LayerDelta::total_ops() const {
  uint64_t n = 0;
  for (uint64_t v : ops) n += v;
  return n;
}

void LayerDelta::Merge(const LayerDelta& o) {
  if (kind.empty()) {
    kind = o.kind;
    description = o.description;
  }
  for (int i = 0; i < kOpCount; ++i) {
    ops[i] += o.ops[i];
    bytes[i] += o.bytes[i];
    errors[i] += o.errors[i];
    latency_sum_ns[i] += o.latency_sum_ns[i];
    latency[i].Merge(o.latency[i]);
  }
  level = o.level;
  cpu_ns += o.cpu_ns;
  cpu_samples += o.cpu_samples;
  for (size_t p = 0; p < kCpuPhaseCount; ++p) cpu_phase_ns[p] += o.cpu_phase_ns[p];
  paths.requests += o.paths.requests;
  paths.total_ns += o.paths.total_ns;
  paths.negative += o.paths.negative;
  for (int l = 0; l < kMaxStackDepth; ++l) {
    paths.self_ns[l] += o.paths.self_ns[l];
    paths.self[l].Merge(o.paths.self[l]);
  }
  for (size_t j = 0; j < o.counter_names.size(); ++j) {
    auto it = std::find(counter_names.begin(), counter_names.end(), o.counter_names[j]);
    if (it == counter_names.end()) {
      counter_names.push_back(o.counter_names[j]);
      counters.push_back(o.counters[j]);
    } else {
      counters[it - counter_names.begin()] += o.counters[j];
    }
  }
}

namespace {

template <typename F>
OpTotals Sum(const std::vector<ThreadResult>& threads, F pick) {
  OpTotals t;
  for (const ThreadResult& th : threads) t.Merge(pick(th));
  return t;
}

}  // namespace

OpTotals RunResult::Read() const { return Sum(threads, [](const ThreadResult& t) { return t.read; }); }
OpTotals RunResult::Write() const { return Sum(threads, [](const ThreadResult& t) { return t.write; }); }
OpTotals RunResult::Flush() const { return Sum(threads, [](const ThreadResult& t) { return t.flush; }); }
OpTotals RunResult::Total() const { return Sum(threads, [](const ThreadResult& t) { return t.Total(); }); }

RunMetrics Metrics(const RunResult& r) {
  RunMetrics m;
  const OpTotals total = r.Total();
  m.ios = total.ios;
  if (r.seconds > 0) {
    m.iops = double(total.ios) / r.seconds;
    m.read_iops = double(r.Read().ios) / r.seconds;
    m.write_iops = double(r.Write().ios) / r.seconds;
    m.mib_s = double(total.bytes) / r.seconds / (1 << 20);
  }
  m.mean_us = Us(total.latency.mean());
  m.read_mean_us = Us(r.Read().latency.mean());
  m.write_mean_us = Us(r.Write().latency.mean());
  m.yields = double(r.yields.yields);
  m.yield_wait_ms = double(r.yields.wait_ns) / 1e6;
  m.yield_max_wait_ms = double(r.yields.max_wait_ns) / 1e6;
  m.ready_max_stall_ms = double(r.yields.max_stall_ns) / 1e6;
  m.signal_wait_ms = double(r.yields.signal_wait_ns) / 1e6;
  if (r.seconds > 0 && r.knobs.schedulers > 0) {
    m.ready_stalled_pct = double(r.yields.stalled_ns) / 1e9 / r.seconds / r.knobs.schedulers * 100;
  }
  m.host_ready_pct = r.host_ready.Pct();
  m.p50_us = Us(double(total.latency.Percentile(50)));
  m.p99_us = Us(double(total.latency.Percentile(99)));
  m.p999_us = Us(double(total.latency.Percentile(99.9)));
  const double cpu_s = r.cpu.own_s();
  const double capacity = r.cpu.capacity_s();
  if (total.ios > 0) m.cpu_us_per_io = cpu_s / double(total.ios) * 1e6;
  m.load_average = r.cpu.load_average;
  if (capacity > 0) {
    m.process_cpu_pct = 100.0 * r.cpu.process_s() / capacity;
    m.steal_pct = 100.0 * r.cpu.steal_s() / capacity;
    m.machine_cpu_pct = 100.0 * r.cpu.machine_busy_s() / capacity;
    m.others_cpu_pct = 100.0 * r.cpu.others_s() / capacity;
  }
  if (cpu_s > 0) m.iops_per_cpu_s = double(total.ios) / cpu_s;
  if (m.process_cpu_pct > 0) m.iops_per_cpu_pct = m.iops / m.process_cpu_pct;
  return m;
}

double EfficiencyOverhead(double base, double eff) { return base > 0 ? (base - eff) / base : 0; }

}  // namespace vstack::bench
