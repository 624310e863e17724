#include "analysis/sim/content.h"

#include <algorithm>
#include <cstring>

namespace vstack::sim {
namespace {

constexpr uint64_t kChunk = 4096;
constexpr int kPatterns = 6;

void FillRandom(SimRng& rng, uint8_t* p, size_t len) {
  for (size_t i = 0; i < len; i += 8) {
    const uint64_t v = rng.Next();
    std::memcpy(p + i, &v, std::min<size_t>(8, len - i));
  }
}

// Byte `at` of the 4 KiB chunk of pattern `id`: the same chunk wherever it is written.
void FillPattern(int id, uint64_t at, uint8_t* p, size_t len) {
  SimRng rng(0x5EED0000u + static_cast<uint64_t>(id));
  uint8_t chunk[kChunk];
  FillRandom(rng, chunk, kChunk);
  std::memcpy(p, chunk + at, len);
}

void FillText(SimRng& rng, uint8_t* p, size_t len) {
  static const char* kWords[] = {"vstack ", "grain ", "journal ", "flush ",
                                 "sector ", "commit ", "bitmap ", "crash "};
  for (size_t i = 0; i < len;) {
    const char* w = kWords[rng.Below(8)];
    for (; *w && i < len; ++w) p[i++] = static_cast<uint8_t>(*w);
  }
}

}  // namespace

uint64_t UnitHash(const uint8_t* unit) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < kUnit; i += 8) {
    uint64_t w;
    std::memcpy(&w, unit + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
  }
  return h ^ (h >> 32);
}

uint64_t ZeroUnitHash() {
  static const uint64_t hash = [] {
    uint8_t zeros[kUnit] = {};
    return UnitHash(zeros);
  }();
  return hash;
}

void FillWrite(SimRng& rng, uint64_t offset, uint8_t* data, size_t len) {
  for (size_t done = 0; done < len;) {
    const uint64_t at = (offset + done) % kChunk;
    const size_t n = std::min<size_t>(kChunk - at, len - done);
    switch (rng.Below(4)) {
      case 0:
        FillRandom(rng, data + done, n);
        break;
      case 1:
        std::memset(data + done, 0, n);
        break;
      case 2:
        FillPattern(static_cast<int>(rng.Below(kPatterns)), at, data + done, n);
        break;
      default:
        FillText(rng, data + done, n);
    }
    done += n;
  }
}

void FillParent(uint64_t seed, uint64_t offset, uint8_t* data, size_t len) {
  for (size_t done = 0; done < len; done += kUnit) {
    SimRng rng(seed * 0x100000001B3ull + (offset + done) / kUnit);
    FillRandom(rng, data + done, kUnit);
    data[done] |= 1;  // never a unit of zeros
  }
}

}  // namespace vstack::sim
