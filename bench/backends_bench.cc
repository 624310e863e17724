// The per-request software cost of each backend at queue depth 1 and 32, and of the statistics
// every queue keeps. Files live on tmpfs (/dev/shm) so the numbers are the software path, not
// this VM's disk (docs/benchmarks.md, "The machine": the page cache here does not stay warm).
//
//   build/bench/backends_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench/queue_driver.h"
#include "bench/run_batches.h"
#include "lib/clock.h"
#include "lib/histogram.h"
#include "lib/registry.h"
#include "lib/stats.h"
#include "lib/sync_io.h"

namespace vstack::bench {
namespace {

constexpr uint64_t kSpan = 256ull << 20;  // 256 MiB working set
constexpr uint64_t kBatch = 8192;          // I/Os per benchmark batch

// A tmpfs file of kSpan bytes written once (so reads hit memory, not holes), shared by the file
// and uring benchmarks and removed at exit.
const std::string& TmpfsFile() {
  static const std::string path = [] {
    std::string p = "/dev/shm/vstack-backends-bench-" + std::to_string(::getpid()) + ".img";
    auto dev = Open("file:" + p + ",create=on,size=" + std::to_string(kSpan));
    if (dev) {
      SyncIo io(**dev);
      AlignedBuffer buf(1 << 20);
      std::memset(buf.data(), 0x5A, buf.size());
      for (uint64_t off = 0; off < kSpan; off += 1 << 20) (void)io.Write(off, buf.span());
    }
    std::atexit([] { ::unlink(TmpfsFile().c_str()); });
    return p;
  }();
  return path;
}

std::string SpecFor(const std::string& backend) {
  if (backend == "null") return "null:256M";
  if (backend == "memory") return "memory:256M";
  return backend + ":" + TmpfsFile();
}

// BM_Backend<backend, op>/depth: cost per 4 KiB request, random offsets.
void BackendIo(benchmark::State& state, const std::string& backend, Op op) {
  auto dev = Open(SpecFor(backend));
  if (!dev) {
    state.SkipWithError(dev.error().ToString().c_str());
    return;
  }
  auto q = (*dev)->OpenQueue();
  if (!q) {
    state.SkipWithError(q.error().ToString().c_str());
    return;
  }
  if (backend == "memory") {  // populate: measure reads and overwrites of real pages
    QueueDriver fill(**q, DriverConfig{.op = Op::kWrite, .depth = 1, .block_size = 4096, .span = kSpan});
    (void)fill.Run(kSpan / 4096 * 2);
  }
  {
    QueueDriver driver(**q, DriverConfig{.op = op,
                                         .depth = static_cast<uint32_t>(state.range(0)),
                                         .block_size = 4096,
                                         .span = kSpan});
    RunBatches(state, driver, kBatch, 4096);
  }
  q->reset();
}

#define VSTACK_BACKEND_BENCH(backend)                                                    \
  BENCHMARK_CAPTURE(BackendIo, backend##_read, #backend, Op::kRead)->Arg(1)->Arg(32);    \
  BENCHMARK_CAPTURE(BackendIo, backend##_write, #backend, Op::kWrite)->Arg(1)->Arg(32)

VSTACK_BACKEND_BENCH(null);
VSTACK_BACKEND_BENCH(memory);
VSTACK_BACKEND_BENCH(file);
VSTACK_BACKEND_BENCH(uring);

// The pieces of the statistics every queue keeps per request, measured alone.
void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(NowNs());
}
BENCHMARK(BM_ClockRead);

void BM_HistogramRecord(benchmark::State& state) {
  LatencyHistogram h;
  uint64_t v = 1234;
  for (auto _ : state) {
    h.Record(v);
    v = v * 6364136223846793005ull + 1442695040888963407ull;
    v &= (1 << 20) - 1;
  }
  benchmark::DoNotOptimize(h.count());
}
BENCHMARK(BM_HistogramRecord);

// Everything the base does per request for statistics: submit accounting, a clock read at
// completion, counters and the histogram.
// StatsMode::kLatency's worst case: a clock read and a histogram per request (a real queue
// reads the clock once per batch).
void BM_QueueStatsPerRequest(benchmark::State& state) {
  QueueStats stats(4, /*latency=*/true);
  uint64_t start = NowNs();
  for (auto _ : state) {
    stats.OnSubmit();
    const uint64_t now = NowNs();
    stats.OnComplete(Op::kRead, 4096, false);
    stats.OnLatency(Op::kRead, now - start);
    start = now;
  }
}
BENCHMARK(BM_QueueStatsPerRequest);

// StatsMode::kCounts, the default: counters only, no clock.
void BM_QueueCountsPerRequest(benchmark::State& state) {
  QueueStats stats(4, /*latency=*/false);
  for (auto _ : state) {
    stats.OnSubmit();
    stats.OnComplete(Op::kRead, 4096, false);
  }
  benchmark::DoNotOptimize(&stats);
}
BENCHMARK(BM_QueueCountsPerRequest);

}  // namespace
}  // namespace vstack::bench
