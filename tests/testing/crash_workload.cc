#include "tests/testing/crash_workload.h"

#include <algorithm>
#include <cstring>

namespace vstack::testing {

void WorkloadRng::Fill(void* data, size_t len) {
  unsigned char* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < len; i += 8) {
    const uint64_t v = Next();
    std::memcpy(p + i, &v, std::min<size_t>(8, len - i));
  }
}

void FillMixed(WorkloadRng& rng, unsigned char* p, size_t len) {
  static const char* kWords[] = {"vstack ", "grain ", "journal ", "flush ", "dedup ", "zstd "};
  for (size_t at = 0; at < len; at += 4096) {
    const size_t n = std::min<size_t>(4096, len - at);
    switch (rng.Below(4)) {
      case 0: {
        WorkloadRng pattern(1000 + rng.Below(6));
        pattern.Fill(p + at, n);
        break;
      }
      case 1:
        for (size_t i = 0; i < n;) {
          const char* w = kWords[rng.Below(6)];
          for (; *w && i < n; ++w) p[at + i++] = static_cast<unsigned char>(*w);
        }
        break;
      case 2:
        rng.Fill(p + at, n);
        break;
      default:
        std::memset(p + at, 0, n);
    }
  }
}

WorkloadOp CrashWorkload::Next() {
  WorkloadOp op;
  if (++count_ % flush_every_ == 0) {
    op.kind = WorkloadOp::kFlush;
    return op;
  }
  op.length = (1 + rng_.Below(rng_.Below(4) == 0 ? 128 : 24)) * 512;
  op.offset = rng_.Below((span_ - op.length) / 512 + 1) * 512;
  if (rng_.Below(10) == 0) {
    op.kind = WorkloadOp::kZeroes;
    return op;
  }
  op.data.resize(op.length);
  FillMixed(rng_, op.data.data(), op.length);
  return op;
}

}  // namespace vstack::testing
