#include "bench/workload/attribution.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace vstack::bench {
namespace {

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

const char* OpPlural(Op op) {
  switch (op) {
    case Op::kRead: return "reads";
    case Op::kWrite: return "writes";
    case Op::kFlush: return "flushes";
    case Op::kDiscard: return "discards";
    case Op::kWriteZeroes: return "write-zeroes";
  }
  return "?";
}

std::string Words(const LayerCost& c) {
  if (c.backend) {
    return c.kind + ": " + Fmt("%.1f", c.self_us_per_io) + " us per guest I/O in the device (median " +
           Fmt("%.1f", c.self_median_us_per_io) + " us; " + Fmt("%.2f", c.in_total) +
           " requests, mean latency " + Fmt("%.1f", c.mean_latency_us) + " us)";
  }
  std::string s = c.kind + ": " + Fmt("%.2f", c.in_total) + " -> " + Fmt("%.2f", c.out_total) +
                  " requests per guest I/O";
  std::string details;
  for (int op = 0; op < kOpCount; ++op) {
    const double d = c.out_per_io[op] - c.in_per_io[op];
    if (std::fabs(d) < 0.0005) continue;
    details += (details.empty() ? "" : ", ") + Fmt("%+.3f ", d) + OpPlural(static_cast<Op>(op));
    if (op == int(Op::kRead) && d < 0) details += " (served without I/O below)";
  }
  if (!details.empty()) s += " (" + details + ")";
  if (c.read_bytes_ratio > 0 && std::fabs(c.read_bytes_ratio - 1) >= 0.005) {
    s += "; read bytes below x" + Fmt("%.2f", c.read_bytes_ratio);
  }
  if (c.write_bytes_ratio > 0 && std::fabs(c.write_bytes_ratio - 1) >= 0.005) {
    s += "; write bytes below x" + Fmt("%.2f", c.write_bytes_ratio);
  }
  s += "; adds " + Fmt("%.2f", c.self_median_us_per_io) + " us of latency per I/O (median; mean " +
       Fmt("%.2f", c.self_us_per_io) + " us)";
  if (!c.counters.empty()) {
    s += "; counters:";
    for (size_t i = 0; i < c.counters.size(); ++i) {
      s += (i ? ", " : " ") + c.counters[i].name + " " + std::to_string(c.counters[i].total) +
           " (" + Fmt("%.4g", c.counters[i].per_io) + "/I/O)";
    }
  }
  return s;
}

double LatencySum(const LayerDelta& l) {
  double s = 0;
  for (uint64_t v : l.latency_sum_ns) s += double(v);
  return s;
}

}  // namespace

Attribution Attribute(const std::vector<LayerDelta>& layers) {
  Attribution a;
  if (layers.empty()) return a;
  a.guest_ios = layers.front().total_ops();
  const double guest = double(std::max<uint64_t>(a.guest_ios, 1));
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerDelta& l = layers[i];
    const LayerDelta* below = i + 1 < layers.size() ? &layers[i + 1] : nullptr;
    LayerCost c;
    c.kind = l.kind;
    c.description = l.description;
    c.backend = below == nullptr;
    for (int op = 0; op < kOpCount; ++op) {
      c.in_per_io[op] = double(l.ops[op]) / guest;
      c.in_total += c.in_per_io[op];
      if (below) {
        c.out_per_io[op] = double(below->ops[op]) / guest;
        c.out_total += c.out_per_io[op];
      }
    }
    const int r = int(Op::kRead), w = int(Op::kWrite);
    if (below && l.bytes[r]) c.read_bytes_ratio = double(below->bytes[r]) / double(l.bytes[r]);
    if (below && l.bytes[w]) c.write_bytes_ratio = double(below->bytes[w]) / double(l.bytes[w]);
    const double own = LatencySum(l);
    const uint64_t n = l.total_ops();
    c.mean_latency_us = n ? Us(own / double(n)) : 0;
    c.self_us_per_io = Us(std::max(0.0, own - (below ? LatencySum(*below) : 0.0)) / guest);
    for (int op = 0; op < kOpCount; ++op) {
      if (l.latency[op].total == 0) continue;
      const double here = l.latency[op].Percentile(50);
      const double there = below ? below->latency[op].Percentile(50) : 0.0;
      c.self_median_us_per_io += c.in_per_io[op] * Us(std::max(0.0, here - there));
    }
    for (size_t j = 0; j < l.counter_names.size(); ++j) {
      if (l.counters[j] == 0) continue;
      c.counters.push_back({l.counter_names[j], l.counters[j], double(l.counters[j]) / guest});
    }
    c.words = Words(c);
    if (!c.backend) {
      a.layers_us_per_io += c.self_us_per_io;
      a.layers_median_us_per_io += c.self_median_us_per_io;
    }
    a.layers.push_back(std::move(c));
  }
  return a;
}

std::vector<LayerDelta> MergeLayerDeltas(const std::vector<const RunResult*>& runs) {
  std::vector<LayerDelta> merged;
  for (const RunResult* r : runs) {
    if (merged.size() < r->layers.size()) merged.resize(r->layers.size());
    for (size_t i = 0; i < r->layers.size(); ++i) merged[i].Merge(r->layers[i]);
  }
  return merged;
}

}  // namespace vstack::bench
