// vstack_space_accuracy: how often `vstack space --estimate`'s intervals hold the exact value
// (docs/space-savings.md, "Estimates: accuracy"). Also makes the two generated datasets used
// there, each reproducible from its seed:
//
//   vstack_space_accuracy --generate vdi DIR      # 20 near-identical VMs
//   vstack_space_accuracy --generate backup DIR   # 12 full backups of a slowly changing volume
//   vstack_space_accuracy [--seeds 50] [--fraction 1%] [--rule R] IMAGE...
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "analysis/space/space_accuracy.h"
#include "analysis/space/space_images.h"
#include "lib/splitmix64.h"

namespace vstack {
namespace {

uint64_t Mix(uint64_t x) { return SplitMix64(x); }

// Grain `id`'s content, of one of several kinds: text-like, a random run then text, random,
// a small alphabet (binary-like), so that compressed sizes spread over the whole range.
void MakeGrain(uint64_t id, unsigned char* g, uint32_t grain) {
  static const char* kWords[] = {"the ",   "select ", "from ",  "kernel ", "library ", "value ",
                                 "index ", "vstack ", "grain ", "block ",  "0x7f3a ",  "\n"};
  uint64_t r = Mix(id);
  const unsigned kind = r % 10;
  uint32_t random_run = kind < 3   ? 0
                        : kind < 6 ? static_cast<uint32_t>(Mix(r) % grain)
                        : kind < 8 ? grain
                                   : 0;
  uint32_t at = 0;
  for (; at < random_run; at += 8) {
    r = Mix(r);
    std::memcpy(g + at, &r, std::min<uint32_t>(8, grain - at));
  }
  while (at < grain) {
    r = Mix(r);
    if (kind >= 8) {
      g[at++] = static_cast<unsigned char>(r % 7);
      continue;
    }
    for (const char* w = kWords[r % 12]; *w && at < grain; ++w)
      g[at++] = static_cast<unsigned char>(*w);
  }
}

bool WriteImage(
    const std::string& path, uint64_t size,
    const std::vector<std::pair<uint64_t, uint64_t>>& grains /* index, id (0: zeros) */) {
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0) return false;
  std::vector<unsigned char> g(4096);
  for (const auto& [index, id] : grains) {
    if (id == 0) {
      std::memset(g.data(), 0, g.size());
    } else {
      MakeGrain(id, g.data(), 4096);
    }
    if (::pwrite(fd, g.data(), g.size(), static_cast<off_t>(index * 4096)) != 4096) return false;
  }
  return ::close(fd) == 0;
}

// 20 VMs of 64 MiB: a shared 24 MiB template of which each VM changed 3%, 4 MiB of its own
// data, 1 MiB of written zeros; the rest never written.
bool GenerateVdi(const std::string& dir) {
  for (uint64_t vm = 0; vm < 20; ++vm) {
    std::vector<std::pair<uint64_t, uint64_t>> grains;
    for (uint64_t i = 0; i < 6144; ++i) {
      const bool changed = Mix(vm * 1000003 + i) % 100 < 3;
      grains.emplace_back(i, changed ? (vm + 1) << 40 | i : 1 + i);
    }
    for (uint64_t i = 0; i < 1024; ++i) grains.emplace_back(8192 + i, (vm + 1) << 48 | i);
    for (uint64_t i = 0; i < 256; ++i) grains.emplace_back(10240 + i, 0);
    char name[32];
    std::snprintf(name, sizeof name, "/vm%02llu.img", static_cast<unsigned long long>(vm));
    if (!WriteImage(dir + name, 64 << 20, grains)) return false;
  }
  return true;
}

// 12 full backups of a 32 MiB volume that changes 2% of its grains between backups; 5% of the
// volume is zeros.
bool GenerateBackup(const std::string& dir) {
  std::vector<uint64_t> volume(8192);
  for (uint64_t i = 0; i < volume.size(); ++i) volume[i] = Mix(i) % 20 == 0 ? 0 : (1ULL << 56) | i;
  for (uint64_t b = 0; b < 12; ++b) {
    if (b > 0) {
      for (uint64_t i = 0; i < volume.size(); ++i) {
        if (Mix(b * 7919 + i * 31) % 50 == 0) volume[i] = (b << 48) | (1ULL << 57) | i;
      }
    }
    std::vector<std::pair<uint64_t, uint64_t>> grains;
    for (uint64_t i = 0; i < volume.size(); ++i) grains.emplace_back(i, volume[i]);
    char name[32];
    std::snprintf(name, sizeof name, "/backup%02llu.img", static_cast<unsigned long long>(b));
    if (!WriteImage(dir + name, 32 << 20, grains)) return false;
  }
  return true;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 3 && args[0] == "--generate") {
    const bool ok = args[1] == "vdi"      ? GenerateVdi(args[2])
                    : args[1] == "backup" ? GenerateBackup(args[2])
                                          : false;
    if (!ok)
      std::fprintf(stderr, "vstack_space_accuracy: cannot generate %s in %s\n", args[1].c_str(),
                   args[2].c_str());
    return ok ? 0 : 1;
  }
  SpaceOptions o;
  o.estimate = true;
  uint64_t seeds = 50;
  std::vector<std::string> images;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--seeds" && i + 1 < args.size()) {
      seeds = std::stoull(args[++i]);
    } else if (args[i] == "--fraction" && i + 1 < args.size()) {
      std::string f = args[++i];
      const double v = f.back() == '%' ? std::stod(f.substr(0, f.size() - 1)) / 100 : std::stod(f);
      o.modulus = static_cast<uint64_t>(std::llround(1 / v));
    } else if (args[i] == "--rule" && i + 1 < args.size()) {
      auto rule = ParseSizeRule(args[++i]);
      if (!rule) {
        std::fprintf(stderr, "vstack_space_accuracy: %s\n", rule.error().message.c_str());
        return 2;
      }
      o.rule = *rule;
    } else {
      images.push_back(args[i]);
    }
  }
  if (images.empty()) {
    std::fprintf(stderr,
                 "usage: vstack_space_accuracy [--seeds N] [--fraction F] [--rule R] IMAGE...\n"
                 "       vstack_space_accuracy --generate vdi|backup DIR\n");
    return 2;
  }
  auto opened = OpenSpaceImages(images, o.grain);
  if (!opened) {
    std::fprintf(stderr, "vstack_space_accuracy: %s\n", opened.error().ToString().c_str());
    return 1;
  }
  auto r = CheckAccuracy(*opened, o, seeds);
  if (!r) {
    std::fprintf(stderr, "vstack_space_accuracy: %s\n", r.error().ToString().c_str());
    return 1;
  }
  std::printf(
      "%zu images, fraction 1/%llu, rule %s, %llu seeds, %.0f fingerprints kept on average; "
      "the pass's sketch %s the check's\n\n",
      images.size(), static_cast<unsigned long long>(o.modulus), FormatSizeRule(o.rule).c_str(),
      static_cast<unsigned long long>(seeds), r->mean_sample,
      r->pass_matches ? "equals" : "DIFFERS FROM");
  std::printf("| factor | exact | held in | mean 95%% interval width | largest error |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  const size_t steps[] = {2, 3, 4, 5};
  for (size_t f = 0; f < kAccuracyFactorCount; ++f) {
    const double exact = f < 4 ? r->exact.steps[steps[f]].ratio : r->exact.data_reduction;
    std::printf(
        "| %s | %.3fx | %llu/%llu (%.0f%%) | %.2f%% | %.2f%% |\n", kAccuracyFactors[f], exact,
        static_cast<unsigned long long>(r->held[f]), static_cast<unsigned long long>(r->seeds),
        100.0 * double(r->held[f]) / double(r->seeds), 100 * r->width[f], 100 * r->worst[f]);
  }
  bool ok = r->pass_matches;
  for (size_t f = 0; f < kAccuracyFactorCount; ++f) ok = ok && r->held[f] * 10 >= r->seeds * 9;
  return ok ? 0 : 3;
}

}  // namespace
}  // namespace vstack

int main(int argc, char** argv) { return vstack::Main(argc, argv); }
