#include "bench/workload/knobs.h"

#include <cmath>
#include <cstdio>

#include "blockdev/emulation/service_time.h"
#include "lib/size.h"

namespace vstack::bench {
namespace {

Error Bad(const std::string& flag, const std::string& why) {
  return MakeError(Errc::kInvalidArgument, flag + ": " + why);
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

}  // namespace

Status ValidateKnobs(const WorkloadKnobs& k) {
  if (k.block_size == 0 || k.block_size % 512 != 0) {
    return Bad("--bs", std::to_string(k.block_size) + " is not a positive multiple of 512");
  }
  if (k.block_size > (64u << 20)) return Bad("--bs", "at most 64 MiB");
  if (k.write_pct > 100) return Bad("--write-pct", std::to_string(k.write_pct) + " is not in 0..100");
  if (k.queue_depth == 0 || k.queue_depth > 1024) {
    return Bad("--qd", std::to_string(k.queue_depth) + " is not in 1..1024");
  }
  if (k.threads == 0 || k.threads > 256) {
    return Bad("--threads", std::to_string(k.threads) + " is not in 1..256");
  }
  if (uint64_t(k.block_size) * k.queue_depth * k.threads * 2 > (4ull << 30)) {
    return Bad("--bs", "bs x qd x threads needs more than 4 GiB of buffers");
  }
  if (k.io_count == 0 && !(k.duration_s > 0 && k.duration_s <= 86400)) {
    return Bad("--duration", Seconds(k.duration_s) + " is not in (0, 86400] s");
  }
  if (!(k.warmup_s >= 0 && k.warmup_s <= 3600)) {
    return Bad("--warmup", Seconds(k.warmup_s) + " is not in [0, 3600] s");
  }
  if (k.target_size != 0 && k.target_size < k.block_size) {
    return Bad("--size", FormatSize(k.target_size) + " is smaller than the block size");
  }
  if (k.distribution == Distribution::kZipf) {
    if (k.pattern != AccessPattern::kRandom) {
      return Bad("--distribution", "zipf needs --pattern random");
    }
    if (!(k.zipf_theta > 0 && k.zipf_theta <= 10) || std::fabs(k.zipf_theta - 1.0) < 1e-9) {
      return Bad("--distribution", "zipf theta must be in (0, 10] and not 1 (e.g. zipf:1.2)");
    }
  }
  if (k.dedupe_pct > 100) return Bad("--dedupe-pct", std::to_string(k.dedupe_pct) + " is not in 0..100");
  if (k.compress_pct > 100) {
    return Bad("--compress-pct", std::to_string(k.compress_pct) + " is not in 0..100");
  }
  if (k.content != Content::kRandom && (k.dedupe_pct != 0 || k.compress_pct != 0)) {
    return Bad("--content",
               ContentName(k.content) + " cannot be combined with --dedupe-pct or --compress-pct");
  }
  if (k.flush_interval != 0 && k.write_pct == 0) {
    return Bad("--flush-interval", "needs writes (--write-pct > 0)");
  }
  if (!(k.cpu_ready_pct >= 0 && k.cpu_ready_pct < 100)) {
    return Bad("--cpu-ready", std::to_string(k.cpu_ready_pct) + " is not a percentage in [0, 100)");
  }
  if (k.cpu_ready_pct > 0 && k.quantum_ns == 0) {
    return Bad("--quantum", "must be above 0 with --cpu-ready");
  }
  if (k.schedulers == 0 || k.schedulers > k.threads) {
    return Bad("--schedulers", std::to_string(k.schedulers) + " is not in 1..threads");
  }
  if (auto st = ServiceTime::Parse("--ready-stall", k.ready_stall); !st) {
    return MakeError(Errc::kInvalidArgument, st.error().message);
  }
  if (k.task_cpu_sleeps && k.task_cpu.empty()) {
    return Bad("--task-cpu-mode", "sleep needs --task-cpu");
  }
  if (k.exchange && k.queue_depth != 1) {
    return Bad("--exchange", "needs --qd 1 (a thread's step is one I/O)");
  }
  if (!k.task_cpu.empty()) {
    if (k.quantum_ns == 0) {
      return Bad("--task-cpu", "needs the quantum scheduler (--cpu-ready or --quantum)");
    }
    if (auto st = ServiceTime::Parse("--task-cpu", k.task_cpu); !st) {
      return MakeError(Errc::kInvalidArgument, st.error().message);
    }
  }
  return OkStatus();
}

Status CheckKnobsAgainstDevice(const WorkloadKnobs& k, const BlockDevice& device) {
  const Geometry& g = device.geometry();
  if (k.block_size % g.logical_block != 0) {
    return Bad("--bs", std::to_string(k.block_size) + " is not a multiple of the stack's " +
                           std::to_string(g.logical_block) + "-byte logical block");
  }
  if (g.size_bytes < k.block_size) {
    return Bad("--bs", "larger than the whole device (" + FormatSize(g.size_bytes) + ")");
  }
  if (k.write_pct > 0 && device.read_only()) return Bad("--write-pct", "the stack is read-only");
  if (k.flush_interval != 0 && !device.Has(kCapFlush)) {
    return Bad("--flush-interval", "the stack does not support flush");
  }
  if (k.threads > 1 && !device.Has(kCapThreadSafe)) {
    return Bad("--threads", "the stack allows one queue at a time; use --threads 1");
  }
  return OkStatus();
}

uint64_t RegionBytes(const WorkloadKnobs& k, const BlockDevice& device) {
  uint64_t size = device.geometry().size_bytes;
  if (k.target_size != 0 && k.target_size < size) size = k.target_size;
  return size / k.block_size * k.block_size;
}

std::string DescribeDistribution(const WorkloadKnobs& k) {
  if (k.distribution == Distribution::kUniform) return "uniform";
  char buf[32];
  std::snprintf(buf, sizeof buf, "zipf:%g", k.zipf_theta);
  return buf;
}

Status ParseDistribution(const std::string& text, WorkloadKnobs* k) {
  if (text == "uniform") {
    k->distribution = Distribution::kUniform;
    return OkStatus();
  }
  if (text.rfind("zipf:", 0) == 0) {
    char* end = nullptr;
    const double theta = std::strtod(text.c_str() + 5, &end);
    if (end != text.c_str() + 5 && *end == '\0') {
      k->distribution = Distribution::kZipf;
      k->zipf_theta = theta;
      return OkStatus();
    }
  }
  return Bad("--distribution", "'" + text + "' is neither 'uniform' nor 'zipf:THETA'");
}

std::vector<std::string> PatternNames() { return {"random", "sequential"}; }

std::vector<std::string> ContentNames() { return {"random", "zeros", "pattern"}; }

std::string ContentName(Content c) {
  return c == Content::kZeros ? "zeros" : c == Content::kPattern ? "pattern" : "random";
}

Status ParseContent(const std::string& text, WorkloadKnobs* k) {
  for (Content c : {Content::kRandom, Content::kZeros, Content::kPattern}) {
    if (text == ContentName(c)) {
      k->content = c;
      return OkStatus();
    }
  }
  return Bad("--content", "'" + text + "' is not one of random|zeros|pattern");
}

std::string DescribeContent(const WorkloadKnobs& k) {
  if (k.content == Content::kZeros) return "zeros";
  if (k.content == Content::kPattern) return "pattern (bytes 0..255 repeating)";
  return "random (dedupe " + std::to_string(k.dedupe_pct) + "%, compress " +
         std::to_string(k.compress_pct) + "%)";
}

std::string DescribeWorkload(const WorkloadKnobs& k) {
  std::string s = FormatSize(k.block_size) + " " +
                  (k.pattern == AccessPattern::kRandom
                       ? "random (" + DescribeDistribution(k) + ")"
                       : std::string("sequential")) +
                  ", " + std::to_string(k.write_pct) + "% writes, " + std::to_string(k.threads) +
                  (k.threads == 1 ? " thread" : " threads") + " x QD" +
                  std::to_string(k.queue_depth) + ", ";
  s += k.io_count ? std::to_string(k.io_count) + " I/Os" : Seconds(k.duration_s);
  if (k.warmup_s > 0) s += " + " + Seconds(k.warmup_s) + " warm-up";
  if (k.quantum_ns != 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, ", %u scheduler%s with a %s quantum", k.schedulers,
                  k.schedulers == 1 ? "" : "s", FormatDurationNs(double(k.quantum_ns)).c_str());
    s += buf;
    if (!k.task_cpu.empty()) {
      s += ", " + k.task_cpu + (k.task_cpu_sleeps ? " held (asleep)" : " of CPU") + " before each I/O";
    }
    if (k.cpu_ready_pct > 0) {
      std::snprintf(buf, sizeof buf, ", CPU Ready %.3g%% (stalls %s)", k.cpu_ready_pct,
                    k.ready_stall.c_str());
      s += buf;
    }
  }
  if (k.exchange) s += ", the threads meet at an exchange after every I/O";
  return s;
}

}  // namespace vstack::bench
