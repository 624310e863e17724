// The grain layers at memory speed (docs/benchmarks.md, "The grain engine at memory speed"):
// the CPU per I/O that dedup, zstd and crc32c add over the bare memory backend, for the
// workload of `vstack bench` (8 KiB random, 50% writes, 4 threads x QD8, its write content), and
// in the same run the bare work the layers cannot avoid on the same grains: ZSTD_compress at
// level 1, XXH3-128 and CRC-32C.
//
//   build/bench/grain_layers_bench [--rounds 5] [--duration 2] [--threads 4]
//                                  [--stack SPEC]... (layers over memory:1G; default: the three)
//
// For callgrind (instructions per I/O, independent of the machine's load): one stack, a
// fixed count of I/Os on one thread, smaller devices, no bare measurement:
//   valgrind --tool=callgrind --toggle-collect='vstack::bench::RunWorkload*'
//       build/bench/grain_layers_bench --callgrind dedup --ios 200000     (one command)
//
// Each stack gets a fresh memory:1G backend whose pages are all touched before the layers are
// formatted on it, so no layer pays for the backend's first touch of a page (a log-structured
// layer writes all over it); then its 256 MiB region is filled once (as `vstack bench` does),
// and the workload runs (0.5 s warm-up). Stacks run interleaved, round by round; CPU per I/O is
// the workload threads' own CPU clocks (bench/workload/runner.h). Prints each stack's median
// with its range, its difference to memory's in the same round (median and range), and the bare
// costs per I/O (per write times the share of writes).

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/workload/runner.h"
#include "bench/workload/write_content.h"
#include "blockdev/dedup/fingerprint.h"
#include "blockdev/metastore/crc32c.h"
#include "blockdev/zstd/grain_codec.h"
#include "lib/aligned_buffer.h"
#include "lib/clock.h"
#include "lib/registry.h"
#include "lib/spec.h"
#include "lib/sync_io.h"

namespace vstack::bench {
namespace {

uint64_t kLower = uint64_t{1} << 30;

// Opens `layers` (a spec without its backend) over `lower`, bottom layer first.
Result<DevicePtr> OpenLayersOn(const std::string& layers, DevicePtr lower) {
  if (layers.empty()) return lower;
  VSTACK_ASSIGN_OR_RETURN(std::vector<SpecPart> parts, ParseSpec(layers));
  for (size_t k = parts.size(); k-- > 0;) {
    const ComponentInfo* info = Registry::Global().Find(parts[k].name);
    if (info == nullptr || !info->open_layer) {
      return MakeError(Errc::kNotFound, "no layer named '" + parts[k].name + "'");
    }
    parts[k].options.push_back(SpecOption{"format", "on"});
    OptionValues values(parts[k].name, parts[k].positional, parts[k].options, &info->options);
    VSTACK_ASSIGN_OR_RETURN(lower, info->open_layer(std::move(lower), values, OpenOptions{}));
  }
  return lower;
}

// Writes [from, bytes) of `dev`, 1 MiB at a time: `byte`, or random bytes.
Status WriteAll(BlockDevice& dev, uint64_t from, uint64_t bytes, unsigned char byte, bool random) {
  SyncIo io(dev);
  AlignedBuffer buf(1 << 20);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (uint64_t off = from; off < bytes; off += buf.size()) {
    if (random) {
      for (size_t i = 0; i < buf.size(); i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::memcpy(buf.data() + i, &x, 8);
      }
    } else {
      std::memset(buf.data(), byte, buf.size());
    }
    if (std::error_code ec = io.Write(off, buf.span().first(std::min<uint64_t>(buf.size(), bytes - off)))) {
      return MakeError(ec, "write at " + std::to_string(off) + ": " + ec.message());
    }
  }
  return OkStatus();
}

Result<double> RunStack(const std::string& layers, const WorkloadKnobs& k) {
  VSTACK_ASSIGN_OR_RETURN(DevicePtr lower, Open("memory:" + std::to_string(kLower)));
  // Every page touched, but the first 1 MiB: blank, so the layers format it (they refuse a
  // device whose first 8 KiB are not zero and hold no superblock of theirs).
  VSTACK_RETURN_IF_ERROR(WriteAll(*lower, 1 << 20, kLower, 0xA5, false));
  VSTACK_ASSIGN_OR_RETURN(DevicePtr dev, OpenLayersOn(layers, std::move(lower)));
  VSTACK_RETURN_IF_ERROR(WriteAll(*dev, 0, k.target_size, 0, true));  // the fill
  VSTACK_ASSIGN_OR_RETURN(RunResult r, RunWorkload(*dev, k));
  if (!r.error.empty()) return MakeError(Errc::kIo, layers + ": " + r.error);
  return Metrics(r).cpu_us_per_io;
}

struct Bare {
  double zstd_us = 0, xxh3_us = 0, crc_us = 0;  // per write of block_size bytes
};

// The bare per-grain work on the grains of `writes` writes of the workload's content, made as a
// workload thread makes them: a buffer per request in flight (queue_depth of them, in cache),
// restamped before each write.
Bare MeasureBare(const WorkloadKnobs& k, int writes) {
  WriteContent content(k, 0);
  WorkloadRng rng(k.seed, 0);
  std::vector<AlignedBuffer> bufs;
  for (uint32_t i = 0; i < k.queue_depth; ++i) {
    bufs.emplace_back(k.block_size);
    content.Initialize(bufs.back().data(), k.block_size);
  }
  GrainCompressor c(1);
  AlignedBuffer out(4096);
  uint64_t sink = 0;
  // Restamping (two stores a chunk) is timed alone and taken off: a thread's CPU clock is a
  // system call, too slow to read around each grain.
  auto loop = [&](auto fn) {
    const double t0 = ThreadCpuNs();
    for (int i = 0; i < writes; ++i) {
      std::byte* d = bufs[i % bufs.size()].data();
      content.Stamp(d, k.block_size, rng);
      for (uint32_t g = 0; g < k.block_size; g += 4096) sink += fn(d + g);
    }
    return (ThreadCpuNs() - t0) / 1000.0 / writes;
  };
  const double stamp = loop([](const std::byte*) { return 0; });
  auto time = [&](auto fn) { return std::max(0.0, loop(fn) - stamp); };
  Bare b;
  b.zstd_us = time([&](const std::byte* g) { return c.Compress(g, 4096, out.data()); });
  b.xxh3_us = time([&](const std::byte* g) { return FingerprintOf(g, 4096).lo; });
  b.crc_us = time([&](const std::byte* g) { return Crc32c(g, 4096); });
  if (sink == 42) std::puts("");
  return b;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int Main(int argc, char** argv) {
  int rounds = 5;
  WorkloadKnobs k;
  std::vector<std::string> stacks;
  std::string callgrind;  // one stack ("memory": none), for instruction counts
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], v = argv[i + 1];
    if (flag == "--rounds") rounds = std::stoi(v);
    else if (flag == "--duration") k.duration_s = std::stod(v);
    else if (flag == "--threads") k.threads = static_cast<uint32_t>(std::stoul(v));
    else if (flag == "--stack") stacks.push_back(v);
    else if (flag == "--callgrind") callgrind = v;
    else if (flag == "--ios") k.io_count = std::stoull(v);
    else {
      std::fprintf(stderr, "unknown flag %s (--rounds, --duration, --threads, --stack, "
                           "--callgrind, --ios)\n", argv[i]);
      return 2;
    }
  }
  if (!callgrind.empty()) {
    kLower = 256 << 20;
    k.target_size = 64 << 20;
    k.threads = 1;
    k.warmup_s = 0;
    if (k.io_count == 0) k.io_count = 100000;
    Result<double> c = RunStack(callgrind == "memory" ? "" : callgrind, k);
    if (!c) std::fprintf(stderr, "%s\n", c.error().message.c_str());
    return c ? 0 : 1;
  }
  if (stacks.empty()) stacks = {"dedup", "zstd", "crc32c"};
  stacks.insert(stacks.begin(), "");  // the bare memory backend
  std::vector<std::vector<double>> cpu(stacks.size()), delta(stacks.size());
  std::vector<double> zstd, xxh3, crc;
  for (int r = 0; r < rounds; ++r) {
    k.seed = 1 + r;
    std::vector<double> got(stacks.size());
    for (size_t n = 0; n < stacks.size(); ++n) {
      const size_t s = (n + r) % stacks.size();  // rotated: no stack always runs first
      Result<double> c = RunStack(stacks[s], k);
      if (!c) {
        std::fprintf(stderr, "%s\n", c.error().message.c_str());
        return 1;
      }
      got[s] = *c;
    }
    for (size_t s = 0; s < stacks.size(); ++s) {
      cpu[s].push_back(got[s]);
      delta[s].push_back(got[s] - got[0]);
    }
    const Bare b = MeasureBare(k, 20000);
    const double writes_per_io = k.write_pct / 100.0;
    zstd.push_back(b.zstd_us * writes_per_io);
    xxh3.push_back(b.xxh3_us * writes_per_io);
    crc.push_back(b.crc_us * writes_per_io);
    std::fprintf(stderr, "round %d done\n", r + 1);
  }
  std::printf("%s, %d rounds; CPU per I/O in us (median [min, max])\n",
              DescribeWorkload(k).c_str(), rounds);
  for (size_t s = 0; s < stacks.size(); ++s) {
    const auto [lo, hi] = std::minmax_element(delta[s].begin(), delta[s].end());
    std::printf("  %-24s %6.2f [%5.2f, %5.2f]   over memory: %+5.2f [%+5.2f, %+5.2f]\n",
                (stacks[s].empty() ? "memory:1G" : stacks[s] + "+memory:1G").c_str(),
                Median(cpu[s]), *std::min_element(cpu[s].begin(), cpu[s].end()),
                *std::max_element(cpu[s].begin(), cpu[s].end()), Median(delta[s]), *lo, *hi);
  }
  auto line = [](const char* name, const std::vector<double>& v) {
    std::printf("  bare %-19s %6.2f [%5.2f, %5.2f]\n", name, Median(v),
                *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
  };
  line("ZSTD_compress -1", zstd);
  line("XXH3-128", xxh3);
  line("CRC-32C", crc);
  return 0;
}

}  // namespace
}  // namespace vstack::bench

int main(int argc, char** argv) { return vstack::bench::Main(argc, argv); }
