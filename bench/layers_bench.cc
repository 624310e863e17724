// The per-request software cost of each layer, over the null and memory backends, at queue
// depth 1 and 32: the numbers `vstack bench`'s per-layer attribution is checked against
// (docs/benchmarks.md). Every stack runs next to its bare backend in the same process, so the
// layer's cost is a difference within one run:
//
//   build/bench/layers_bench --benchmark_min_time=0.3 --benchmark_repetitions=5
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
//
// Writes carry unique, 50%-compressible 4 KiB chunks (bench/workload/write_content.h), so dedup
// never hits and zstd has real work; memory stacks are filled first so reads find data. Layers
// that are not in this build are skipped with a message. Over null, a layer that keeps metadata
// below it reads back zeros it did not write; such reads fail and are skipped as well.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench/queue_driver.h"
#include "bench/run_batches.h"
#include "bench/workload/image_setup.h"
#include "bench/workload/stack_stats.h"
#include "bench/workload/write_content.h"
#include "lib/registry.h"
#include "lib/spec.h"

namespace vstack::bench {
namespace {

constexpr uint64_t kSpan = 64ull << 20;
constexpr uint64_t kBatch = 4096;

// "" is the bare backend, the baseline of its group.
// Four stacked passthroughs divide the cost of one forwarding level by four, above the noise.
const char* const kLayers[] = {"",      "passthrough", "passthrough+passthrough",
                               "passthrough+passthrough+passthrough+passthrough",
                               "crc32c", "dedup", "zstd", "dedup+zstd"};

WorkloadKnobs ContentKnobs() {
  WorkloadKnobs k;
  k.block_size = 4096;
  k.compress_pct = 50;
  k.target_size = kSpan;
  return k;
}

// The first component of `layers` that is not registered, or "".
std::string Missing(const std::string& layers) {
  auto parts = ParseSpec(layers);
  if (!parts) return layers;
  for (const SpecPart& p : *parts) {
    if (Registry::Global().Find(p.name) == nullptr) return p.name;
  }
  return "";
}

void LayerIo(benchmark::State& state, std::string layers, std::string backend, Op op,
             StatsMode mode) {
  if (!layers.empty()) {
    if (std::string m = Missing(layers); !m.empty()) {
      state.SkipWithError(("layer '" + m + "' is not in this build").c_str());
      return;
    }
  }
  const std::string spec = (layers.empty() ? "" : layers + "+") + backend + ":" + std::to_string(kSpan);
  auto dev = Open(spec);
  if (!dev) {
    state.SkipWithError(dev.error().ToString().c_str());
    return;
  }
  if (backend == "memory") {  // reads find real data; writes overwrite it
    if (Status s = FillDevice(**dev, ContentKnobs(), nullptr); !s) {
      state.SkipWithError(s.error().ToString().c_str());
      return;
    }
  }
  SetStackStatsMode(**dev, mode);  // after the fill, which measures with latency
  auto q = (*dev)->OpenQueue();
  if (!q) {
    state.SkipWithError(q.error().ToString().c_str());
    return;
  }
  {
    WriteContent content(ContentKnobs(), 1);
    WorkloadRng rng(1, 1);
    std::vector<std::byte*> initialized;
    DriverConfig config{.op = op,
                        .depth = static_cast<uint32_t>(state.range(0)),
                        .block_size = 4096,
                        .span = std::min(kSpan, (*dev)->geometry().size_bytes)};
    config.fill = [&](std::span<std::byte> buf, uint64_t) {
      if (std::find(initialized.begin(), initialized.end(), buf.data()) == initialized.end()) {
        content.Initialize(buf.data(), static_cast<uint32_t>(buf.size()));
        initialized.push_back(buf.data());
      }
      content.Stamp(buf.data(), static_cast<uint32_t>(buf.size()), rng);
    };
    QueueDriver driver(**q, config);
    RunBatches(state, driver, kBatch, 4096);
  }
  q->reset();
}

// Registered before main() runs; whether each layer exists is checked when it runs, because
// components register from static initialisers in other files.
const bool kRegistered = [] {
  for (const char* backend : {"null", "memory"}) {
    for (const char* layers : kLayers) {
      for (Op op : {Op::kRead, Op::kWrite}) {
        const std::string name = std::string("BM_Layer/") + (*layers ? layers : "bare") + "/" +
                                 backend + (op == Op::kRead ? "_read" : "_write");
        benchmark::RegisterBenchmark(name.c_str(), LayerIo, std::string(layers), std::string(backend), op,
                                     StatsMode::kCounts)
            ->Arg(1)
            ->Arg(32);
      }
    }
  }
  // The same with latency statistics on every layer (what `vstack bench` measures with); four
  // passthroughs give one level's cost as `vstack bench` runs it (issue 27's target).
  for (const char* layers : {"", "passthrough", "passthrough+passthrough",
                             "passthrough+passthrough+passthrough+passthrough"}) {
    const std::string name =
        std::string("BM_LayerLatencyStats/") + (*layers ? layers : "bare") + "/memory_read";
    benchmark::RegisterBenchmark(name.c_str(), LayerIo, std::string(layers), std::string("memory"),
                                 Op::kRead, StatsMode::kLatency)
        ->Arg(1)
        ->Arg(32);
  }
  return true;
}();

}  // namespace
}  // namespace vstack::bench
