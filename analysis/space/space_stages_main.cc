// vstack_space_stages: where the exact scan of `vstack space` spends its CPU, stage by stage, on
// one thread (docs/space-savings.md, "Exact scan speed"). Every stage is timed in CPU time of
// the calling thread (CLOCK_THREAD_CPUTIME_ID), one clock read per stage per job (the bytes
// read at once: 4 MiB, or --job), so the figures hold on a shared machine where wall time does
// not:
//
//   vstack_space_stages [--codec zstd:N] [--rule R] [--job BYTES] IMAGE...
//
// The stages are the scan's own calls, in its order: read (SyncIo), zero test (IsZero),
// fingerprint (FingerprintOf, XXH3-128), index (FingerprintSet::Insert), and compression
// (EncodeGrain) of the grains the index saw first. It prints each stage's CPU seconds and its
// speed per core, and the scan's ceiling on two cores: allocated bytes / (CPU seconds / 2).
#include <time.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "analysis/space/space_fingerprint_set.h"
#include "analysis/space/space_images.h"
#include "analysis/space/space_model.h"
#include "blockdev/dedup/fingerprint.h"
#include "blockdev/zstd/grain_codec.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/size.h"

namespace vstack {
namespace {

double ThreadSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

double WallSeconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

enum Stage { kRead, kZero, kFingerprint, kIndex, kCompress, kStages };
constexpr const char* kStageNames[kStages] = {"read (pread, page cache)", "zero test",
                                              "fingerprint (XXH3-128)", "index (distinct set)",
                                              "compression (EncodeGrain)"};

int Main(int argc, char** argv) {
  SpaceOptions o;
  uint64_t job = 4 << 20;  // the bytes read at once
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--codec" && i + 1 < argc) {
      if (Status s = ParseCodec(argv[++i], &o); !s) {
        std::fprintf(stderr, "vstack_space_stages: %s\n", s.error().message.c_str());
        return 2;
      }
    } else if (a == "--rule" && i + 1 < argc) {
      auto rule = ParseSizeRule(argv[++i]);
      if (!rule) {
        std::fprintf(stderr, "vstack_space_stages: %s\n", rule.error().message.c_str());
        return 2;
      }
      o.rule = *rule;
    } else if (a == "--job" && i + 1 < argc) {
      auto size = ParseSize(argv[++i]);
      job = size ? *size : 0;
    } else {
      names.push_back(a);
    }
  }
  if (names.empty() || !o.compress || job == 0 || job % o.grain != 0) {
    std::fprintf(stderr,
                 "usage: vstack_space_stages [--codec zstd:N] [--rule R] [--job BYTES] IMAGE...\n"
                 "  (--job: the bytes read at once, a multiple of the grain; 4M by default)\n");
    return 2;
  }
  auto images = OpenSpaceImages(names, o.grain);
  if (!images) {
    std::fprintf(stderr, "vstack_space_stages: %s\n", images.error().ToString().c_str());
    return 1;
  }
  const uint32_t grain = o.grain;
  AlignedBuffer buf(job);
  std::vector<unsigned char> out(grain);
  std::vector<Fingerprint> fps;
  std::vector<const std::byte*> nonzero, first;
  FingerprintSet set;
  GrainCompressor compressor(o.level);
  double cpu[kStages] = {};
  uint64_t bytes[kStages] = {};
  uint64_t allocated = 0, stored = 0;
  const double wall0 = WallSeconds();
  for (SpaceImage& img : *images) {
    allocated += img.used_bytes();
    SyncIo io(*img.device);
    for (const auto& [off, len] : img.used) {
      for (uint64_t at = 0; at < len; at += job) {
        const uint64_t n = std::min(job, len - at);
        const uint64_t grains = (n + grain - 1) / grain;
        double t = ThreadSeconds();
        auto lap = [&](Stage s, uint64_t b) {
          const double now = ThreadSeconds();
          cpu[s] += now - t;
          bytes[s] += b;
          t = now;
        };
        if (std::error_code ec = io.Read(off + at, buf.span().first(n))) {
          std::fprintf(stderr, "vstack_space_stages: %s: %s\n", img.name.c_str(),
                       ec.message().c_str());
          return 1;
        }
        std::memset(buf.data() + n, 0, grains * grain - n);
        lap(kRead, n);
        nonzero.clear();
        for (uint64_t i = 0; i < grains; ++i) {
          const std::byte* g = buf.data() + i * grain;
          if (!IsZero(g, grain)) nonzero.push_back(g);
        }
        lap(kZero, grains * grain);
        fps.resize(nonzero.size());
        for (size_t i = 0; i < nonzero.size(); ++i) fps[i] = FingerprintOf(nonzero[i], grain);
        lap(kFingerprint, nonzero.size() * grain);
        first.clear();
        for (size_t i = 0; i < nonzero.size(); ++i) {
          if (set.Insert(fps[i])) first.push_back(nonzero[i]);
        }
        lap(kIndex, nonzero.size() * grain);
        for (const std::byte* g : first) {
          stored += EncodeGrain(compressor, o.rule, g, grain, out.data()).form.slot;
        }
        lap(kCompress, first.size() * grain);
      }
    }
  }
  const double wall = WallSeconds() - wall0;
  double total = 0;
  for (double c : cpu) total += c;
  auto mb = [](double b) { return b / 1e6; };
  std::printf("%zu images, %.1f MB allocated (%.1f MB of data extents read), zstd:%d, rule %s\n",
              images->size(), mb(double(allocated)), mb(double(bytes[kRead])), o.level,
              FormatSizeRule(o.rule).c_str());
  std::printf("%.0f distinct grains, %.1f MB stored; one thread, %.2f s CPU in %.2f s wall\n\n",
              double(set.size()), mb(double(stored)), total, wall);
  std::printf("| stage | MB in | CPU s | MB/s per core | share of CPU |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (int s = 0; s < kStages; ++s) {
    std::printf("| %s | %.1f | %.3f | %.0f | %.1f%% |\n", kStageNames[s], mb(double(bytes[s])),
                cpu[s], cpu[s] > 0 ? mb(double(bytes[s])) / cpu[s] : 0.0, 100 * cpu[s] / total);
  }
  std::printf("| all | %.1f allocated | %.3f | %.0f | 100%% |\n\n", mb(double(allocated)), total,
              mb(double(allocated)) / total);
  std::printf("ceiling on 2 cores, nothing else running: %.2f GB/s of allocated data\n",
              2 * double(allocated) / total / 1e9);
  return 0;
}

}  // namespace
}  // namespace vstack

int main(int argc, char** argv) { return vstack::Main(argc, argv); }
