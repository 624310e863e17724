#include "lib/stats.h"

#include <algorithm>

namespace vstack {

uint64_t LayerStats::counter(const std::string& name) const {
  for (size_t i = 0; i < counter_names.size(); ++i) {
    if (counter_names[i] == name) return counters[i];
  }
  return 0;
}

void PathStats::Merge(const PathStats& other) {
  requests += other.requests;
  total_ns += other.total_ns;
  negative += other.negative;
  for (int l = 0; l < kMaxStackDepth; ++l) {
    self_ns[l] += other.self_ns[l];
    self[l].Merge(other.self[l]);
  }
}

void LayerStats::Merge(const LayerStats& other) {
  paths.Merge(other.paths);
  for (int i = 0; i < kOpCount; ++i) {
    op[i].ops += other.op[i].ops;
    op[i].bytes += other.op[i].bytes;
    op[i].errors += other.op[i].errors;
    latency[i].Merge(other.latency[i]);
  }
  in_flight += other.in_flight;
  cpu_ns += other.cpu_ns;
  cpu_samples += other.cpu_samples;
  for (size_t p = 0; p < kCpuPhaseCount; ++p) cpu_phase_ns[p] += other.cpu_phase_ns[p];
  for (size_t j = 0; j < other.counter_names.size(); ++j) {
    auto it = std::find(counter_names.begin(), counter_names.end(), other.counter_names[j]);
    if (it == counter_names.end()) {
      counter_names.push_back(other.counter_names[j]);
      counters.push_back(other.counters[j]);
    } else {
      counters[it - counter_names.begin()] += other.counters[j];
    }
  }
}

LayerStats LayerStats::CountsSince(const LayerStats& earlier) const {
  LayerStats d = *this;
  for (int i = 0; i < kOpCount; ++i) {
    d.op[i].ops -= earlier.op[i].ops;
    d.op[i].bytes -= earlier.op[i].bytes;
    d.op[i].errors -= earlier.op[i].errors;
  }
  d.paths.requests -= earlier.paths.requests;
  d.paths.total_ns -= earlier.paths.total_ns;
  d.paths.negative -= earlier.paths.negative;
  for (int l = 0; l < kMaxStackDepth; ++l) d.paths.self_ns[l] -= earlier.paths.self_ns[l];
  d.cpu_ns -= earlier.cpu_ns;
  d.cpu_samples -= earlier.cpu_samples;
  for (size_t p = 0; p < kCpuPhaseCount; ++p) d.cpu_phase_ns[p] -= earlier.cpu_phase_ns[p];
  for (size_t j = 0; j < d.counter_names.size(); ++j) {
    d.counters[j] -= earlier.counter(d.counter_names[j]);
  }
  return d;
}

QueueStats::Time::Time() {
  for (LatencyHistogram& h : latency) h.Reserve();
  for (LatencyHistogram& h : self) h.Reserve();
}

QueueStats::QueueStats(size_t custom_counters, bool latency) : custom_(custom_counters) {
  if (latency) time_ = std::make_unique<Time>();
}

void QueueStats::OnPathEnd(const uint32_t* path_ns, int levels, uint64_t total_ns) {
  time_->total_ns.Add(total_ns);
  for (int l = 0; l < levels; ++l) time_->self[l].Record(path_ns[l]);
}

void QueueStats::AddTo(LayerStats& out, bool histograms) const {
  for (int i = 0; i < kOpCount; ++i) {
    out.op[i].ops += ops_[i].Get();
    out.op[i].bytes += bytes_[i].Get();
    out.op[i].errors += errors_[i].Get();
  }
  if (time_ && histograms) {
    for (int i = 0; i < kOpCount; ++i) out.latency[i].Merge(time_->latency[i]);
    out.paths.requests += time_->self[0].count();
    out.paths.total_ns += time_->total_ns.Get();
    out.paths.negative += time_->negative.Get();
    for (int l = 0; l < kMaxStackDepth; ++l) {
      out.paths.self_ns[l] += time_->self[l].sum();
      out.paths.self[l].Merge(time_->self[l]);
    }
  }
  out.in_flight += in_flight_.Get();
  for (size_t j = 0; j < custom_.size() && j < out.counters.size(); ++j) {
    out.counters[j] += custom_[j].Get();
  }
}

}  // namespace vstack
