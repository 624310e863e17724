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

const char kBelowResolution[] = "below the timestamp resolution";

// "0.73" or, below the resolution, the words for it (never a bare 0).
std::string UsOrBelow(double us, bool resolved) {
  return resolved ? Fmt("%.2f", us) : std::string(kBelowResolution);
}

std::string TimeWords(const LayerCost& c, bool timed) {
  if (!timed) return "not measured (the stack kept counters only)";
  if (!c.self_resolved) {
    return std::string(kBelowResolution) +
           Fmt(" (under %.3f us per guest I/O: one clock read ", kSelfTimeResolutionUs) +
           (c.backend ? "per batch)"
                      : "per batch is shared through the stack, so the CPU it spends handing a "
                        "request on counts in the level below; its cost shows in CPU per I/O)");
  }
  std::string s = Fmt("%.2f", c.self_us_per_io) + " us per guest I/O (mean; p50 " +
                  UsOrBelow(c.self_median_us_per_io, c.self_median_resolved) + ", p99 " +
                  UsOrBelow(c.self_p99_us_per_io, c.self_p99_us_per_io >= kSelfTimeResolutionUs) +
                  ")";
  if (c.self_us_per_io > c.self_p99_us_per_io) {
    s += ", the mean carried by fewer than 1% of the I/Os";
  }
  return s;
}

// "dedup: 8.20 us CPU per I/O (hash 0.50, index 1.10, metadata 2.00, submit 4.60, other 0.00); "
// (nothing when the CPU was not sampled; no parenthesis for a layer without phases), with the CPU a layer
// holds on modelled vCPUs, which is not the host's: "hv: 0.40 us CPU per I/O (+ 275.00 us held
// on modelled vCPUs, not host CPU); ".
std::string CpuHead(const LayerCost& c, bool sampled) {
  std::string s = c.kind + ": ";
  if (sampled) s += Fmt("%.2f us CPU per I/O", c.cpu_us_per_io);
  for (size_t i = 0; sampled && i < c.cpu_phases.size(); ++i) {
    s += (i == 0 ? " (" : ", ") + c.cpu_phases[i].name + Fmt(" %.2f", c.cpu_phases[i].us_per_io) +
         (i + 1 == c.cpu_phases.size() ? ")" : "");
  }
  if (c.held_cpu_us_per_io > 0) {
    s += std::string(sampled ? " " : "") +
         Fmt("(+ %.2f us held on modelled vCPUs, not host CPU)", c.held_cpu_us_per_io);
  }
  return s + (sampled || c.held_cpu_us_per_io > 0 ? "; " : "");
}

std::string Words(const LayerCost& c, bool timed, bool sampled) {
  if (c.backend) {
    return CpuHead(c, sampled) + "device time " + TimeWords(c, timed) + "; " +
           Fmt("%.2f", c.in_total) + " requests per guest I/O, mean latency " +
           Fmt("%.1f", c.mean_latency_us) + " us";
  }
  std::string s = CpuHead(c, sampled) + Fmt("%.2f", c.in_total) + " -> " +
                  Fmt("%.2f", c.out_total) + " requests per guest I/O";
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
  s += "; self time " + TimeWords(c, timed);
  if (c.own_requests_per_io > 0) {
    s += "; its own I/O below (off the guest's completion path: metadata, write-back, or I/O "
         "beside its own wait): " + Fmt("%.4g", c.own_requests_per_io) + " requests and " +
         Fmt("%.2f", c.own_us_per_io) + " us per guest I/O (device " +
         Fmt("%.2f", c.own_device_us_per_io) + " us)";
    if (c.own_overlaps) s += ", overlapped with guest I/O (more than the layer's self time)";
  }
  const char* sep = "; counters: ";  // the sentence names only those that moved
  for (const CounterRate& k : c.counters) {
    if (k.total == 0) continue;
    s += sep + k.name + " " + std::to_string(k.total) + " (" + Fmt("%.4g", k.per_io) + "/I/O)";
    sep = ", ";
  }
  return s;
}

// The CPU split and its check: "CPU per guest I/O: layers 8.80 us (dedup 8.20, uring 0.60) +
// outside 4.00 us (workload 2.10, io_uring workers 1.90) = 12.80 us against 13.00 us measured
// (-1.5%): adds up."
std::string CpuWords(const Attribution& a) {
  std::string layers;
  double in_layers = 0;
  for (const LayerCost& c : a.layers) {
    layers += (layers.empty() ? "" : ", ") + c.kind + Fmt(" %.2f", c.cpu_us_per_io);
    in_layers += c.cpu_us_per_io;
  }
  std::string s = "CPU per guest I/O: layers " + Fmt("%.2f us", in_layers) + " (" + layers +
                  ") + outside " + Fmt("%.2f us", a.outside_cpu_us_per_io) + " (workload " +
                  Fmt("%.2f", a.outside_engine_us_per_io) + ", io_uring workers " +
                  Fmt("%.2f", a.outside_uring_us_per_io) + ") = " +
                  Fmt("%.2f us", a.cpu_sum_us_per_io) + " against " +
                  Fmt("%.2f us", a.cpu_total_us_per_io) + " measured (" +
                  Fmt("%+.1f%%", a.cpu_residual_pct) + ")";
  if (a.cpu_adds_up) return s + ": adds up.";
  const double missing = a.cpu_total_us_per_io - a.cpu_sum_us_per_io;
  if (missing > 0) {
    return s + Fmt(": the sum misses %.2f us per I/O", missing) +
           " (more than " + Fmt("%.0f%%", kCpuSumTolerance * 100) +
           "), CPU on threads the sampler does not cover: a layer's own thread that is not "
           "enrolled, or a library's threads.";
  }
  return s + Fmt(": the sum exceeds the measured CPU by %.2f us per I/O", -missing) + " (more than " +
         Fmt("%.0f%%", kCpuSumTolerance * 100) + "): the sampler charged CPU outside the window.";
}

double LatencySum(const LayerDelta& l) {
  double s = 0;
  for (uint64_t v : l.latency_sum_ns) s += double(v);
  return s;
}

// The layer's CPU by phase, per guest I/O: the phases charged, then "other"; none when no phase
// was charged.
std::vector<CpuPhaseShare> PhaseShares(const LayerDelta& l, double per) {
  std::vector<CpuPhaseShare> out;
  uint64_t in_phases = 0;
  for (size_t p = 0; p < kCpuPhaseCount; ++p) {
    if (l.cpu_phase_ns[p] == 0) continue;
    out.push_back({CpuPhaseName(static_cast<CpuPhase>(p)), Us(double(l.cpu_phase_ns[p]) / per)});
    in_phases += l.cpu_phase_ns[p];
  }
  if (out.empty()) return out;
  const uint64_t other = l.cpu_ns > in_phases ? l.cpu_ns - in_phases : 0;
  out.push_back({kOtherCpuPhase, Us(double(other) / per)});
  return out;
}

}  // namespace

Attribution Attribute(const std::vector<LayerDelta>& layers, double measured_us,
                      const CpuUsage* cpu) {
  Attribution a;
  if (layers.empty()) return a;
  a.cpu_sampled = cpu != nullptr && cpu->sampled && cpu->threads_s > 0;
  a.guest_ios = layers.front().total_ops();
  const LayerDelta::Paths& guest = layers.front().paths;
  a.timed = guest.requests != 0;
  a.joined = guest.negative;
  // Per guest I/O: the top layer's paths are exactly the guest's requests.
  const double per = double(std::max<uint64_t>(a.timed ? guest.requests : a.guest_ios, 1));
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerDelta& l = layers[i];
    const LayerDelta* below = i + 1 < layers.size() ? &layers[i + 1] : nullptr;
    LayerCost c;
    c.kind = l.kind;
    c.description = l.description;
    c.backend = below == nullptr;
    c.level = l.level;
    for (int op = 0; op < kOpCount; ++op) {
      c.in_per_io[op] = double(l.ops[op]) / per;
      c.in_total += c.in_per_io[op];
      if (below) {
        c.out_per_io[op] = double(below->ops[op]) / per;
        c.out_total += c.out_per_io[op];
      }
    }
    const int r = int(Op::kRead), w = int(Op::kWrite);
    if (below && l.bytes[r]) c.read_bytes_ratio = double(below->bytes[r]) / double(l.bytes[r]);
    if (below && l.bytes[w]) c.write_bytes_ratio = double(below->bytes[w]) / double(l.bytes[w]);
    const uint64_t n = l.total_ops();
    c.mean_latency_us = n ? Us(LatencySum(l) / double(n)) : 0;
    if (a.timed) {
      c.self_us_per_io = Us(double(guest.self_ns[c.level]) / per);
      c.self_median_us_per_io = Us(guest.self[c.level].Percentile(50));
      c.self_p99_us_per_io = Us(guest.self[c.level].Percentile(99));
      c.self_resolved = c.self_us_per_io >= kSelfTimeResolutionUs;
      c.self_median_resolved = c.self_median_us_per_io >= kSelfTimeResolutionUs;
      if (below) {  // paths that ended one level down: this layer's own I/O
        const LayerDelta::Paths& own = below->paths;
        c.own_requests_per_io = double(own.requests) / per;
        c.own_us_per_io = Us(double(own.total_ns) / per);
        c.own_device_us_per_io = Us(double(own.self_ns[0]) / per);
        c.own_overlaps = c.own_us_per_io > c.self_us_per_io;
      }
    }
    for (size_t j = 0; j < l.counter_names.size(); ++j) {  // every one, moved or not (a fixed schema)
      c.counters.push_back({l.counter_names[j], l.counters[j], double(l.counters[j]) / per});
      if (l.counter_names[j] == kHeldCpuCounter) c.held_cpu_us_per_io = Us(double(l.counters[j]) / per);
    }
    if (a.cpu_sampled) {
      c.cpu_us_per_io = Us(double(l.cpu_ns) / per);
      c.cpu_samples = l.cpu_samples;
      c.cpu_phases = PhaseShares(l, per);
    }
    c.words = Words(c, a.timed, a.cpu_sampled);
    if (c.backend) {
      a.device_us_per_io = c.self_us_per_io;
    } else {
      a.layers_us_per_io += c.self_us_per_io;
      a.layers_median_us_per_io += c.self_median_us_per_io;
    }
    a.layers.push_back(std::move(c));
  }
  if (a.timed) {
    a.end_to_end_us = Us(double(guest.total_ns) / per);
    a.sum_us = a.layers_us_per_io + a.device_us_per_io;
  }
  if (measured_us > 0 && a.timed) {
    a.measured_us = measured_us;
    a.residual_pct = (a.sum_us - measured_us) / measured_us * 100.0;
  }
  if (a.cpu_sampled) {
    const double us_per_io_per_s = 1e6 / per;
    a.cpu_total_us_per_io = cpu->threads_s * us_per_io_per_s;
    a.outside_engine_us_per_io = cpu->engine_s * us_per_io_per_s;
    a.outside_uring_us_per_io = cpu->uring_workers_s * us_per_io_per_s;
    a.outside_cpu_us_per_io = a.outside_engine_us_per_io + a.outside_uring_us_per_io;
    a.cpu_sum_us_per_io = a.outside_cpu_us_per_io;
    for (const LayerCost& c : a.layers) a.cpu_sum_us_per_io += c.cpu_us_per_io;
    a.cpu_residual_pct = (a.cpu_sum_us_per_io - a.cpu_total_us_per_io) / a.cpu_total_us_per_io * 100;
    a.cpu_adds_up = std::fabs(a.cpu_residual_pct) <= kCpuSumTolerance * 100;
    a.cpu_words = CpuWords(a);
  } else if (cpu != nullptr) {
    a.cpu_words = "CPU per layer: not sampled (" +
                  (cpu->sampling_error.empty() ? std::string("no CPU measured")
                                               : cpu->sampling_error) + ").";
  }
  return a;
}

std::string AttributionSentence(const Attribution& a, const RatioInterval& cpu,
                                const std::string& base) {
  if (!a.timed) return "";
  const LayerCost* top = nullptr;  // the resolved layer with the most self time
  std::string below;               // the layers below the resolution, by kind
  int n_below = 0;
  for (const LayerCost& c : a.layers) {
    if (c.backend) continue;
    if (!c.self_resolved) {
      below += (n_below++ ? ", " : "") + c.kind;
    } else if (top == nullptr || c.self_us_per_io > top->self_us_per_io) {
      top = &c;
    }
  }
  if (top == nullptr && n_below == 0) return "";
  std::string s;
  if (top != nullptr) {
    s = " The layers above the device take " + Fmt("%.2f us", a.layers_us_per_io) +
        " per I/O (mean self time), most in " + top->kind + " (" +
        Fmt("%.2f us", top->self_us_per_io) + ", p50 " +
        (top->self_median_resolved ? Fmt("%.2f us", top->self_median_us_per_io)
                                   : std::string(kBelowResolution)) +
        ")";
    if (n_below > 0) s += "; " + below + ": " + kBelowResolution;
  } else {
    // Nothing to say in time: say why, and where the cost shows instead.
    const bool one = n_below == 1;
    s = std::string(" The self time of ") + below + " is " + kBelowResolution +
        " (one clock read per batch is shared through the stack, so the CPU " +
        (one ? "it spends" : "they spend") + " handing a request on counts in the level below); " +
        (one ? "its" : "their") + " cost shows in CPU per I/O against " + base + ": ";
    const double pct = (cpu.estimate - 1) * 100;
    if (cpu.n == 0) {
      s = s.substr(0, s.size() - 2) + ", which was not measured";
    } else if (!cpu.has_interval()) {
      s += Fmt("%+.1f%%", pct) + " (1 round, no interval)";
    } else {
      s += Fmt("%+.1f%%", pct) + " (" + Fmt("%+.1f", (cpu.low - 1) * 100) + " to " +
           Fmt("%+.1f%%", (cpu.high - 1) * 100) + ")" +
           (cpu.significant ? "" : ", not significant: not resolved there either");
    }
  }
  if (a.measured_us > 0) {
    s += "; layers + device = " + Fmt("%.1f us", a.sum_us) + " against a measured mean latency of " +
         Fmt("%.1f us", a.measured_us) + " (residual " + Fmt("%+.1f%%", a.residual_pct) + ")";
  }
  return s + ".";
}

double MeasuredMeanUs(const std::vector<const RunResult*>& runs) {
  double sum = 0, n = 0;
  for (const RunResult* r : runs) {
    for (const ThreadResult& t : r->threads) {
      for (const OpTotals* o : {&t.read, &t.write, &t.flush}) {
        sum += double(o->latency.sum());
        n += double(o->latency.count());
      }
    }
  }
  return n > 0 ? Us(sum / n) : 0;
}

CpuUsage MergeCpu(const std::vector<const RunResult*>& runs) {
  CpuUsage merged;
  for (const RunResult* r : runs) merged.Merge(r->cpu);
  return merged;
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
