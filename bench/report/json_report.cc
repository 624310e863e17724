// The JSON report: the same BenchReport as the text, plus every round's full results.
#include <cmath>

#include "bench/report/report.h"
#include "lib/size.h"

namespace vstack::bench {

using nlohmann::json;

namespace {

json SpreadJson(const bench::Spread& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"n", s.n}};
}

// A ratio to the baseline with its 95% interval; ci_low/ci_high are null with one round.
json RatioJson(const bench::RatioInterval& r) {
  if (r.n == 0) return nullptr;
  return {{"estimate", r.estimate},
          {"ci_low", r.has_interval() ? json(r.low) : json(nullptr)},
          {"ci_high", r.has_interval() ? json(r.high) : json(nullptr)},
          {"significant", r.significant},
          {"rounds", r.n}};
}

// The efficiency overhead (1 - efficiency ratio) with the interval that follows from it.
json OverheadJson(const bench::StackSummary& s) {
  const bench::RatioInterval& e = s.efficiency_ratio;
  if (e.n == 0) return nullptr;
  return {{"estimate", s.overhead_vs_base},
          {"ci_low", e.has_interval() ? json(1 - e.high) : json(nullptr)},
          {"ci_high", e.has_interval() ? json(1 - e.low) : json(nullptr)},
          {"significant", e.significant},
          {"rounds", e.n}};
}

json LatencyJson(const LatencyHistogram& h) {
  json j = {{"count", h.count()},
            {"min", double(h.min()) / 1000},
            {"mean", h.mean() / 1000},
            {"stddev", h.stddev() / 1000},
            {"max", double(h.max()) / 1000}};
  for (const PercentileRow& row : PercentileRows()) {
    j[row.key] = double(h.Percentile(row.pct)) / 1000;
  }
  return j;
}

json OpJson(const bench::OpTotals& o, double seconds) {
  return {{"ios", o.ios},
          {"bytes", o.bytes},
          {"errors", o.errors},
          {"iops", seconds > 0 ? double(o.ios) / seconds : 0.0},
          {"mib_s", seconds > 0 ? double(o.bytes) / seconds / (1 << 20) : 0.0},
          {"latency_us", LatencyJson(o.latency)}};
}

json KnobsJson(const bench::WorkloadKnobs& k) {
  return {{"block_size", k.block_size},
          {"write_pct", k.write_pct},
          {"pattern", k.pattern == bench::AccessPattern::kRandom ? "random" : "sequential"},
          {"distribution", bench::DescribeDistribution(k)},
          {"queue_depth", k.queue_depth},
          {"threads", k.threads},
          {"duration_s", k.duration_s},
          {"io_count", k.io_count},
          {"warmup_s", k.warmup_s},
          {"target_size", k.target_size},
          {"seed", k.seed},
          {"flush_interval", k.flush_interval},
          {"content", bench::ContentName(k.content)},
          {"dedupe_pct", k.dedupe_pct},
          {"compress_pct", k.compress_pct},
          {"description", bench::DescribeWorkload(k)}};
}

json CpuJson(const bench::CpuUsage& c) {
  json cpus = json::array();
  for (const bench::CpuTimes& t : c.cpus) {
    cpus.push_back({{"user_s", t.user}, {"kernel_s", t.kernel}, {"idle_s", t.idle}, {"steal_s", t.steal}});
  }
  return {{"wall_s", c.wall_s},
          {"process_user_s", c.process_user_s},
          {"process_kernel_s", c.process_kernel_s},
          {"threads_s", c.threads_s < 0 ? json(nullptr) : json(c.threads_s)},
          {"steal_s", c.steal_s()},
          {"load_average", c.load_average < 0 ? json(nullptr) : json(c.load_average)},
          {"machine_busy_s", c.machine_busy_s()},
          {"others_s", c.others_s()},
          {"cpus", cpus}};
}

// A percentage that may be unknown (< 0): null then, never 0.
json PctOrNull(double pct) { return pct < 0 ? json(nullptr) : json(pct); }

// The host's CPU Ready of one run: the threads' run-queue wait (host_ready.h).
json HostReadyJson(const bench::HostReady& h) {
  if (!h.measured) return {{"measured", false}, {"pct", nullptr}};
  return {{"measured", true},
          {"run_queue_wait_s", double(h.run_queue_ns) / 1e9},
          {"threads", h.threads},
          {"wall_s", h.wall_s},
          {"pct", PctOrNull(h.Pct())}};
}

// The figures a round's metrics and a stack's summary (their medians over the rounds) share,
// under the same keys.
template <class Figures>
json SharedFiguresJson(const Figures& f) {
  return {{"read_iops", f.read_iops},
          {"write_iops", f.write_iops},
          {"latency_us", {{"mean", f.mean_us}, {"p50", f.p50_us}, {"p99", f.p99_us}, {"p99.9", f.p999_us}}},
          {"cpu_us_per_io", f.cpu_us_per_io},
          {"process_cpu_pct", f.process_cpu_pct},
          {"machine_cpu_pct", f.machine_cpu_pct},
          {"others_cpu_pct", f.others_cpu_pct},
          {"host_ready_pct", PctOrNull(f.host_ready_pct)},
          {"iops_per_cpu_s", f.iops_per_cpu_s},
          {"iops_per_cpu_pct", f.iops_per_cpu_pct}};
}

json MetricsJson(const bench::RunMetrics& m) {
  json j = SharedFiguresJson(m);
  j.update({{"ios", m.ios}, {"iops", m.iops}, {"mib_s", m.mib_s}, {"steal_pct", m.steal_pct}});
  return j;
}

json PerOp(const std::array<double, kOpCount>& v) {
  json j = json::object();
  for (int i = 0; i < kOpCount; ++i) j[std::string(OpName(static_cast<Op>(i)))] = v[i];
  return j;
}

json LayerDeltaJson(const bench::LayerDelta& l) {
  json ops = json::object();
  for (int i = 0; i < kOpCount; ++i) {
    ops[std::string(OpName(static_cast<Op>(i)))] = {
        {"ops", l.ops[i]},
        {"bytes", l.bytes[i]},
        {"errors", l.errors[i]},
        {"latency_sum_ns", l.latency_sum_ns[i]},
        {"latency_p50_us", l.latency[i].Percentile(50) / 1000},
        {"latency_p99_us", l.latency[i].Percentile(99) / 1000}};
  }
  json counters = json::object();
  for (size_t i = 0; i < l.counter_names.size(); ++i) counters[l.counter_names[i]] = l.counters[i];
  return {{"kind", l.kind}, {"description", l.description}, {"ops", ops}, {"counters", counters}};
}

json RunJson(const bench::RunResult& r) {
  json threads = json::array();
  for (const bench::ThreadResult& t : r.threads) {
    threads.push_back({{"index", t.index},
                       {"total", OpJson(t.Total(), r.seconds)},
                       {"read", OpJson(t.read, r.seconds)},
                       {"write", OpJson(t.write, r.seconds)},
                       {"flush", OpJson(t.flush, r.seconds)}});
  }
  json layers = json::array();
  for (const bench::LayerDelta& l : r.layers) layers.push_back(LayerDeltaJson(l));
  // The quantum scheduler's counts of this round (null without one): a sweep's spread.
  json yields = nullptr;
  if (r.knobs.quantum_ns != 0) {
    const bench::YieldStats& y = r.yields;
    yields = {{"yields", y.yields},
              {"wait_ms", double(y.wait_ns) / 1e6},
              {"max_wait_ms", double(y.max_wait_ns) / 1e6},
              {"signal_wait_ms", double(y.signal_wait_ns) / 1e6},
              {"stalls", y.stalls},
              {"stalled_ms", double(y.stalled_ns) / 1e6},
              {"max_stall_ms", double(y.max_stall_ns) / 1e6}};
  }
  return {{"round", r.round + 1},
          {"seconds", r.seconds},
          {"region_bytes", r.region_bytes},
          {"seed", r.knobs.seed},
          {"interrupted", r.interrupted},
          {"error", r.error},
          {"metrics", MetricsJson(bench::Metrics(r))},
          {"total", OpJson(r.Total(), r.seconds)},
          {"read", OpJson(r.Read(), r.seconds)},
          {"write", OpJson(r.Write(), r.seconds)},
          {"flush", OpJson(r.Flush(), r.seconds)},
          {"threads", threads},
          {"cpu", CpuJson(r.cpu)},
          {"host_ready", HostReadyJson(r.host_ready)},
          {"scheduler", yields},
          {"layers", layers}};
}

// `v`, or null when it was not measured.
json NullUnless(bool measured, double v) { return measured ? json(v) : json(nullptr); }

json AttributionJson(const bench::Attribution& a) {
  json layers = json::array();
  for (const bench::LayerCost& c : a.layers) {
    json counters = json::array();
    for (const bench::CounterRate& k : c.counters) {
      counters.push_back({{"name", k.name}, {"total", k.total}, {"per_io", k.per_io}});
    }
    json phases = json::object();  // phase name -> CPU us per I/O; with "other" they sum to cpu
    for (const bench::CpuPhaseShare& p : c.cpu_phases) phases[p.name] = p.us_per_io;
    layers.push_back({{"kind", c.kind},
                      {"description", c.description},
                      {"backend", c.backend},
                      {"requests_in_per_io", PerOp(c.in_per_io)},
                      {"requests_out_per_io", PerOp(c.out_per_io)},
                      {"requests_in_total", c.in_total},
                      {"requests_out_total", c.out_total},
                      {"read_bytes_ratio", c.read_bytes_ratio},
                      {"write_bytes_ratio", c.write_bytes_ratio},
                      {"self_us_per_io", c.self_us_per_io},
                      {"self_median_us_per_io", c.self_median_us_per_io},
                      {"self_p99_us_per_io", c.self_p99_us_per_io},
                      {"self_time_resolved", c.self_resolved},
                      {"self_median_resolved", c.self_median_resolved},
                      {"level", c.level},
                      {"own_requests_per_io", c.own_requests_per_io},
                      {"own_us_per_io", c.own_us_per_io},
                      {"own_device_us_per_io", c.own_device_us_per_io},
                      {"own_overlaps", c.own_overlaps},
                      {"mean_latency_us", c.mean_latency_us},
                      {"cpu_us_per_io", a.cpu_sampled ? json(c.cpu_us_per_io) : json(nullptr)},
                      {"cpu_phases", a.cpu_sampled ? phases : json(nullptr)},
                      {"cpu_samples", c.cpu_samples},
                      {"held_cpu_us_per_io", c.held_cpu_us_per_io},
                      {"counters", counters},
                      {"words", c.words}});
  }
  return {{"guest_ios", a.guest_ios},
          {"seconds", a.seconds},
          {"layers_us_per_io", a.layers_us_per_io},
          {"layers_median_us_per_io", a.layers_median_us_per_io},
          {"timed", a.timed},
          {"device_us_per_io", a.device_us_per_io},
          {"end_to_end_us", a.end_to_end_us},
          {"sum_us", a.sum_us},
          {"measured_us", a.measured_us},
          {"residual_pct", a.residual_pct},
          {"joined", a.joined},
          {"cpu_sampled", a.cpu_sampled},
          {"outside_cpu_us_per_io", NullUnless(a.cpu_sampled, a.outside_cpu_us_per_io)},
          {"outside_engine_cpu_us_per_io", NullUnless(a.cpu_sampled, a.outside_engine_us_per_io)},
          {"outside_uring_workers_cpu_us_per_io", NullUnless(a.cpu_sampled, a.outside_uring_us_per_io)},
          {"cpu_sum_us_per_io", NullUnless(a.cpu_sampled, a.cpu_sum_us_per_io)},
          {"cpu_total_us_per_io", NullUnless(a.cpu_sampled, a.cpu_total_us_per_io)},
          {"cpu_residual_pct", NullUnless(a.cpu_sampled, a.cpu_residual_pct)},
          {"cpu_adds_up", a.cpu_sampled ? json(a.cpu_adds_up) : json(nullptr)},
          {"cpu_words", a.cpu_words},
          {"layers", layers}};
}

json AnchorJson(const bench::AnchorSummary& a) {
  auto opt = [](double v) { return v < 0 ? json(nullptr) : json(v); };
  return {{"tool", a.tool},
          {"runs", a.runs},
          {"iops", SpreadJson(a.iops)},
          {"mib_s", a.mib_s},
          {"p50_us", opt(a.p50_us)},
          {"p99_us", opt(a.p99_us)},
          {"cpu_us_per_io", opt(a.cpu_us_per_io)},
          {"vstack_ratio", SpreadJson(a.ratio)},
          {"vstack_ratio_interval", RatioJson(a.ratio_interval)},
          {"vstack_ios", a.vstack_ios},
          {"tool_ios", a.tool_ios},
          {"capped", a.capped},
          {"command", a.command},
          {"note", a.note},
          {"errors", a.errors}};
}

json AnchorRunJson(const bench::AnchorRun& a) {
  const bench::AnchorResult& r = a.result;
  return {{"tool", a.tool},     {"round", a.round + 1}, {"error", a.error}, {"command", r.command},
          {"seconds", r.seconds}, {"ios", r.ios},     {"iops", r.iops},     {"mib_s", r.mib_s},
          {"capped", r.capped},
          {"p50_us", r.p50_us}, {"p99_us", r.p99_us}, {"cpu_s", r.cpu_s},   {"note", r.note}};
}

}  // namespace

json RenderJson(const BenchReport& r) {
  json stacks = json::array();
  for (size_t i = 0; i < r.summary.stacks.size(); ++i) {
    const bench::StackSummary& s = r.summary.stacks[i];
    const bench::StackOutcome& o = r.result.stacks[i];
    json rounds = json::array();
    for (const bench::RunResult& run : o.rounds) rounds.push_back(RunJson(run));
    json anchors = json::array();
    for (const bench::AnchorSummary& a : s.anchors) anchors.push_back(AnchorJson(a));
    json anchor_runs = json::array();
    for (const bench::AnchorRun& a : o.anchors) anchor_runs.push_back(AnchorRunJson(a));
    json summary = nullptr;
    if (s.runs > 0) {
      summary = SharedFiguresJson(s);
      summary.update({{"iops", SpreadJson(s.iops)},
                      {"mib_s", SpreadJson(s.mib_s)},
                      {"read_mean_us", s.read_mean_us},
                      {"write_mean_us", s.write_mean_us},
                      {"iops_vs_base", SpreadJson(s.iops_vs_base)},
                      {"vs_base",
                       {{"iops", RatioJson(s.iops_ratio)},
                        {"cpu_per_io", RatioJson(s.cpu_ratio)},
                        {"efficiency", RatioJson(s.efficiency_ratio)},
                        {"p99", RatioJson(s.p99_ratio)},
                        {"efficiency_overhead", OverheadJson(s)}}},
                      {"overhead_vs_base", s.overhead_vs_base},
                      {"median_round", s.median_round + 1},
                      {"latency_all_rounds_us", LatencyJson(s.latency)},
                      {"gap", s.gap}});
    }
    stacks.push_back({{"name", s.name},
                      {"spec", s.spec},
                      {"chain", s.chain},
                      {"prepare", bench::PrepareName(o.plan.prepare)},
                      {"prepared", bench::PrepareName(o.prepared)},
                      {"read_only", o.plan.read_only},
                      {"not_run", s.runs == 0 && s.skipped.empty() && s.error.empty()},
                      {"note", s.note},
                      {"skipped", s.skipped},
                      {"error", s.error},
                      {"interrupted", s.interrupted},
                      {"baseline", s.baseline},
                      {"runs", s.runs},
                      {"summary", summary},
                      {"attribution", AttributionJson(s.attribution)},
                      {"anchors", anchors},
                      {"anchor_runs", anchor_runs},
                      {"rounds", rounds}});
  }
  json noise = json::array();
  for (const bench::RoundNoise& n : r.summary.noise) {
    noise.push_back({{"round", n.round + 1},
                     {"others_cpu_pct", n.others_cpu_pct},
                     {"steal_pct", n.steal_pct},
                     {"host_ready_pct", PctOrNull(n.host_ready_pct)},
                     {"load_average", n.load_average < 0 ? json(nullptr) : json(n.load_average)}});
  }
  const double reached = r.summary.precision_reached;
  return {{"command", r.command},
          {"knobs", KnobsJson(r.result.knobs)},
          {"rounds_planned", r.result.rounds_planned},
          {"rounds_done", r.result.rounds_done},
          {"rounds_auto", r.result.auto_rounds
                              ? json{{"precision_asked", r.result.precision_asked},
                                     {"max_time_s", r.result.max_time_s},
                                     {"stopped", r.result.rounds_stopped}}
                              : json(nullptr)},
          {"precision_reached", std::isfinite(reached) ? json(reached) : json(nullptr)},
          {"noise_warning", r.result.auto_rounds
                                ? bench::NoiseWarning(r.summary, r.result.precision_asked)
                                : std::string()},
          {"noise", noise},
          {"statistics", RoundRule(r)},
          {"interrupted", r.result.interrupted},
          {"error", r.result.error},
          {"scratch_dir", r.result.scratch_dir},
          {"baseline", r.summary.baseline},
          {"stacks", stacks},
          {"preset", PresetTablesJson(r)}};
}

}  // namespace vstack::bench
