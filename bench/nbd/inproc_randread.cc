// inproc_randread SPEC SECONDS [prefill]: 4K random reads at queue depth 32 on one queue, in
// process: the job of bench/nbd/randread-4k-qd32.fio without NBD in between, driven by the
// benchmarks' QueueDriver. Prints "iops N". bench/nbd/run.sh divides the NBD figure by this one.
// (A stand-in for `vstack bench --bs 4k --write-pct 0 --qd 32 --threads 1` until that command
// is on main.)
//
// With "prefill", the whole device is written first (1 MiB writes), so that reads find data.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/queue_driver.h"
#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SPEC SECONDS [prefill]\n", argv[0]);
    return 2;
  }
  auto dev = vstack::Open(argv[1]);
  if (!dev) {
    std::fprintf(stderr, "%s\n", dev.error().ToString().c_str());
    return 1;
  }
  const double seconds = std::atof(argv[2]);
  const uint64_t size = (*dev)->geometry().size_bytes;
  if (argc > 3 && std::string(argv[3]) == "prefill") {
    vstack::SyncIo io(**dev);
    vstack::AlignedBuffer chunk(1 << 20);
    for (size_t i = 0; i < chunk.size(); ++i) chunk.data()[i] = std::byte(i * 131 + 7);
    for (uint64_t off = 0; off < size; off += chunk.size()) {
      const uint64_t n = std::min<uint64_t>(chunk.size(), size - off);
      if (auto ec = io.Write(off, chunk.span().first(n))) {
        std::fprintf(stderr, "prefill: %s\n", ec.message().c_str());
        return 1;
      }
    }
  }
  auto queue = (*dev)->OpenQueue();
  if (!queue) {
    std::fprintf(stderr, "%s\n", queue.error().ToString().c_str());
    return 1;
  }
  uint64_t ios = 0;
  {
    vstack::bench::QueueDriver driver(**queue, {.op = vstack::Op::kRead, .depth = 32});
    const auto start = std::chrono::steady_clock::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (auto ec = driver.Run(8192)) {
        std::fprintf(stderr, "read failed: %s\n", ec.message().c_str());
        return 1;
      }
      ios += 8192;
    }
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("iops %.0f\n", ios / elapsed);
  }
  queue->reset();
  return (*dev)->Close() ? 0 : 1;
}
