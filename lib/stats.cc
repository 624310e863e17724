#include "lib/stats.h"

#include <algorithm>

namespace vstack {

uint64_t LayerStats::counter(const std::string& name) const {
  for (size_t i = 0; i < counter_names.size(); ++i) {
    if (counter_names[i] == name) return counters[i];
  }
  return 0;
}

void LayerStats::Merge(const LayerStats& other) {
  for (int i = 0; i < kOpCount; ++i) {
    op[i].ops += other.op[i].ops;
    op[i].bytes += other.op[i].bytes;
    op[i].errors += other.op[i].errors;
    latency[i].Merge(other.latency[i]);
  }
  in_flight += other.in_flight;
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
  for (size_t j = 0; j < d.counter_names.size(); ++j) {
    d.counters[j] -= earlier.counter(d.counter_names[j]);
  }
  return d;
}

void QueueStats::AddTo(LayerStats& out) const {
  for (int i = 0; i < kOpCount; ++i) {
    out.op[i].ops += ops_[i].Get();
    out.op[i].bytes += bytes_[i].Get();
    out.op[i].errors += errors_[i].Get();
    out.latency[i].Merge(latency_[i]);
  }
  out.in_flight += in_flight_.Get();
  for (size_t j = 0; j < custom_.size() && j < out.counters.size(); ++j) {
    out.counters[j] += custom_[j].Get();
  }
}

}  // namespace vstack
