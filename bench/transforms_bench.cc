// The transform layers against the bare libraries they wrap, in the same run (docs/benchmarks.md,
// "Transform layers"):
//   - dedup: 4 KiB writes on the memory backend, duplicate and unique data, next to the memory
//     backend alone; the fingerprinting step (zero test + XXH3-128 over an iovec) next to the
//     bare XXH3-128 call; index bytes per unique grain;
//   - zstd: the layer's 4 KiB writes next to bare per-grain libzstd at the same level, and the
//     layer on 1 and 2 threads (each with its own queue) to show compression does not serialise;
//   - crc32c: the layer's writes and reads next to the bare CRC-32C.
//
//   build/bench/transforms_bench --benchmark_repetitions=5
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <time.h>

#include <cstring>
#include <functional>
#include <span>
#include <thread>

#include "bench/queue_driver.h"
#include "bench/run_batches.h"
#include "blockdev/metastore/crc32c.h"
#include "blockdev/dedup/fingerprint.h"
#include "blockdev/zstd/grain_codec.h"
#include "lib/aligned_buffer.h"
#include "lib/clock.h"
#include "lib/iovec.h"
#include "lib/registry.h"

namespace vstack::bench {
namespace {

constexpr uint64_t kGrain = 4096;
constexpr uint64_t kBatch = 4096;       // writes per benchmark batch
constexpr uint64_t kPool = 16 << 20;    // bytes of source data cycled through

using Fill = std::function<void(std::span<std::byte> buf, uint64_t n)>;

// Keeps `depth` 4 KiB requests in flight on one queue at sequential offsets that wrap around
// [base, base + span); each write's buffer is filled by `fill(buffer, n)` (n counts writes)
// just before it goes down.
QueueDriver ContentDriver(IoQueue& q, Op op, uint32_t depth, uint64_t span, Fill fill,
                          uint64_t base = 0) {
  return QueueDriver(q, DriverConfig{.op = op, .depth = depth, .block_size = kGrain,
                                     .span = span, .base = base, .sequential = true,
                                     .register_buffers = false, .fill = std::move(fill)});
}

// Source data: text-like runs of words and structured binary, no zeros (zero grains skip the
// codec); about 3x compressible at 4 KiB with zstd -1.
const AlignedBuffer& Pool() {
  static const AlignedBuffer pool = [] {
    AlignedBuffer b(kPool);
    static const char* kWords[] = {"select ", "customer ", "order ", "vstack ", "grain ",
                                   "journal ", "index ", "where ", "update ", "commit "};
    uint64_t x = 88172645463325252ull;
    auto next = [&x] {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return x;
    };
    auto* p = reinterpret_cast<unsigned char*>(b.data());
    for (uint64_t g = 0; g < kPool; g += kGrain) {
      if ((g / kGrain) % 4 == 3) {  // structured binary: small random values in wide fields
        for (uint64_t i = 0; i < kGrain; i += 8) {
          const uint64_t v = next() & 0x0000FFFF00FF00FFull;
          std::memcpy(p + g + i, &v, 8);
        }
        continue;
      }
      for (uint64_t i = 0; i < kGrain;) {
        for (const char* w = kWords[next() % 10]; *w && i < kGrain; ++w) p[g + i++] = *w;
      }
    }
    return b;
  }();
  return pool;
}

void FillFromPool(std::span<std::byte> buf, uint64_t n) {
  std::memcpy(buf.data(), Pool().data() + (n * kGrain) % kPool, kGrain);
}

// Runs `driver` batches until the benchmark stops; items and bytes are 4 KiB requests.
template <typename D>
void Drive(benchmark::State& state, D& driver) {
  RunBatches(state, driver, kBatch, kGrain);
}

uint64_t Counter(BlockDevice& d, const std::string& name) { return d.Stats().counter(name); }

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

double PropertyOf(BlockDevice& d, const std::string& key) {
  PropertyList props;
  d.Properties(props);
  for (const Property& p : props) {
    if (p.key != key) continue;
    if (const double* v = std::get_if<double>(&p.value)) return *v;
    if (const uint64_t* v = std::get_if<uint64_t>(&p.value)) return double(*v);
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// dedup

// 4 KiB writes at queue depth `range(0)` over a 64 MiB span: "dup" writes the same grain every
// time (every write is a dedup hit), "unique" stamps a counter into each grain (every write
// stores a new grain and releases the one it overwrites), "memory" is the backend alone. The
// device below is 80 MiB and one untimed lap of writes warms it, so no variant pays for the
// memory backend's first touch of a page.
void DedupWrite(benchmark::State& state, const std::string& stack, bool unique) {
  auto dev = Open(stack);
  if (!dev) return state.SkipWithError(dev.error().ToString().c_str());
  auto q = (*dev)->OpenQueue();
  if (!q) return state.SkipWithError(q.error().ToString().c_str());
  {
    QueueDriver driver = ContentDriver(**q, Op::kWrite, static_cast<uint32_t>(state.range(0)),
                                       64 << 20, [unique](std::span<std::byte> buf, uint64_t n) {
                                         std::memcpy(buf.data(), Pool().data(), kGrain);
                                         if (unique) std::memcpy(buf.data(), &n, sizeof n);
                                       });
    (void)driver.Run(2 * (80 << 20) / kGrain);  // warm-up lap
    const uint64_t hits = Counter(**dev, "dedup_hits");
    Drive(state, driver);
    if ((*dev)->kind() == "dedup") {
      state.counters["hits_per_write"] = double(Counter(**dev, "dedup_hits") - hits) /
                                         double(std::max<uint64_t>(1, state.iterations()));
    }
  }
  q->reset();
}
BENCHMARK_CAPTURE(DedupWrite, memory, std::string("memory:80M"), true)->Arg(1)->Arg(32);
BENCHMARK_CAPTURE(DedupWrite, dup, std::string("dedup:size=64M+memory:80M"), false)->Arg(1)->Arg(32);
BENCHMARK_CAPTURE(DedupWrite, unique, std::string("dedup:size=64M+memory:80M"), true)->Arg(1)->Arg(32);

// The layer's fingerprinting of a grain (zero test, then XXH3-128 through the iovec walk) next
// to the bare XXH3-128 call (FingerprintOf is XXH3_128bits and nothing else), over the 16 MiB
// pool: 4 KiB at a time.
void BM_FingerprintBareXxh3(benchmark::State& state) {
  const std::byte* pool = Pool().data();
  uint64_t at = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(FingerprintOf(pool + at, kGrain));
    at = (at + kGrain) % kPool;
  }
  state.SetBytesProcessed(state.iterations() * kGrain);
}
BENCHMARK(BM_FingerprintBareXxh3);

void BM_FingerprintLayerStep(benchmark::State& state) {
  std::byte* pool = const_cast<std::byte*>(Pool().data());
  uint64_t at = 0;
  for (auto _ : state) {
    const iovec v{pool + at, kGrain};
    if (!IsZeroIov(&v, 1, 0, kGrain)) benchmark::DoNotOptimize(FingerprintIov(&v, 1, 0, kGrain));
    at = (at + kGrain) % kPool;
  }
  state.SetBytesProcessed(state.iterations() * kGrain);
}
BENCHMARK(BM_FingerprintLayerStep);

// Memory of the dedup index per unique grain after `range(0)` unique 4 KiB grains (a counter,
// not a time).
void BM_DedupIndexBytesPerUniqueGrain(benchmark::State& state) {
  const uint64_t grains = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    auto dev = Open("dedup:size=" + std::to_string(grains * kGrain) + "+memory:" +
                    std::to_string(grains * kGrain + (256 << 20)));
    if (!dev) return state.SkipWithError(dev.error().ToString().c_str());
    auto q = (*dev)->OpenQueue();
    {
      QueueDriver driver =
          ContentDriver(**q, Op::kWrite, 32, grains * kGrain, [](std::span<std::byte> buf, uint64_t n) {
            std::memcpy(buf.data(), Pool().data(), kGrain);
            std::memcpy(buf.data(), &n, sizeof n);
          });
      (void)driver.Run(grains);
    }
    state.counters["unique_grains"] = PropertyOf(**dev, "space_unique_grains");
    state.counters["index_bytes_per_unique_grain"] = PropertyOf(**dev, "index_bytes_per_unique_grain");
    q->reset();
  }
}
BENCHMARK(BM_DedupIndexBytesPerUniqueGrain)->Arg(1 << 18)->Arg(1 << 20)->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------------
// zstd

// Bare libzstd, one 4 KiB grain at a time with a reused context, at level `range(0)`.
void BM_ZstdBareGrain(benchmark::State& state) {
  GrainCompressor c(static_cast<int>(state.range(0)));
  std::vector<unsigned char> out(kGrain);
  uint64_t at = 0, compressed = 0;
  for (auto _ : state) {
    compressed += c.Compress(Pool().data() + at, kGrain, out.data());
    at = (at + kGrain) % kPool;
  }
  state.SetBytesProcessed(state.iterations() * kGrain);
  state.counters["ratio"] = double(state.iterations() * kGrain) / double(std::max<uint64_t>(1, compressed));
}
BENCHMARK(BM_ZstdBareGrain)->Arg(-1)->Arg(1)->Arg(3);

// The zstd layer over memory, 4 KiB writes of the same pool at QD32, same level. An untimed
// warm-up fills the 80 MiB below, so the memory backend's first touch of pages is not counted.
void BM_ZstdLayerWrite(benchmark::State& state) {
  const std::string level = std::to_string(state.range(0));
  auto dev = Open("zstd:level=" + level + ",size=64M+memory:80M");
  if (!dev) return state.SkipWithError(dev.error().ToString().c_str());
  auto q = (*dev)->OpenQueue();
  {
    QueueDriver driver = ContentDriver(**q, Op::kWrite, 32, 64 << 20, &FillFromPool);
    (void)driver.Run(8 * (80 << 20) / kGrain);  // warm-up: compressed bins cycle the device below
    Drive(state, driver);
  }
  q->reset();
}
BENCHMARK(BM_ZstdLayerWrite)->Arg(-1)->Arg(1)->Arg(3);

// `range(0)` threads, each with its own queue, writing its own 32 MiB of one zstd:level=1
// stack at QD8: bytes per second of wall time, summed over threads. With no lock around
// compression, 2 threads on 2 idle cores approach twice 1 thread.
void BM_ZstdLayerThreads(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  auto dev = Open("zstd:level=1,size=64M+memory:80M");
  if (!dev) return state.SkipWithError(dev.error().ToString().c_str());
  constexpr uint64_t kPerThread = 2048;  // writes per thread per iteration
  {
    auto q = (*dev)->OpenQueue();
    QueueDriver warm = ContentDriver(**q, Op::kWrite, 32, 64 << 20, &FillFromPool);
    (void)warm.Run(8 * (80 << 20) / kGrain);
  }
  double cpu_s = 0, wall_s = 0;
  for (auto _ : state) {
    const uint64_t start = NowNs();
    const double cpu_start = ProcessCpuSeconds();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        auto q = (*dev)->OpenQueue();
        if (!q) return;
        QueueDriver driver = ContentDriver(
            **q, Op::kWrite, 8, 32 << 20,
            [t](std::span<std::byte> buf, uint64_t n) { FillFromPool(buf, n + uint64_t(t) * 997); },
            uint64_t(t) * (32 << 20));  // each thread its own 32 MiB region
        (void)driver.Run(kPerThread);
      });
    }
    for (auto& th : pool) th.join();
    const double wall = double(NowNs() - start) / 1e9;
    state.SetIterationTime(wall);
    wall_s += wall;
    cpu_s += ProcessCpuSeconds() - cpu_start;
  }
  state.SetBytesProcessed(state.iterations() * threads * kPerThread * kGrain);
  // CPUs busy on average: a lock around compression would keep this at or below 1.
  state.counters["cpus_busy"] = wall_s > 0 ? cpu_s / wall_s : 0;
}
BENCHMARK(BM_ZstdLayerThreads)->Arg(1)->Arg(2)->UseManualTime()->MinTime(1)
    ->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------------
// crc32c

void BM_Crc32cBare(benchmark::State& state) {
  uint64_t at = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(Crc32c(Pool().data() + at, kGrain));
    at = (at + kGrain) % kPool;
  }
  state.SetBytesProcessed(state.iterations() * kGrain);
}
BENCHMARK(BM_Crc32cBare);

void Crc32cLayer(benchmark::State& state, const std::string& stack, Op op) {
  auto dev = Open(stack);
  if (!dev) return state.SkipWithError(dev.error().ToString().c_str());
  auto q = (*dev)->OpenQueue();
  {
    QueueDriver fill = ContentDriver(**q, Op::kWrite, 32, 64 << 20, &FillFromPool);
    (void)fill.Run((64 << 20) / kGrain);  // written once, so reads verify real checksums
    QueueDriver driver = ContentDriver(**q, op, 32, 64 << 20, &FillFromPool);
    Drive(state, driver);
  }
  q->reset();
}
BENCHMARK_CAPTURE(Crc32cLayer, memory_write, std::string("memory:80M"), Op::kWrite);
BENCHMARK_CAPTURE(Crc32cLayer, memory_read, std::string("memory:80M"), Op::kRead);
BENCHMARK_CAPTURE(Crc32cLayer, crc32c_write, std::string("crc32c+memory:80M"), Op::kWrite);
BENCHMARK_CAPTURE(Crc32cLayer, crc32c_read, std::string("crc32c+memory:80M"), Op::kRead);

}  // namespace
}  // namespace vstack::bench
