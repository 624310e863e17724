// The one clock used for request latency: CLOCK_MONOTONIC in nanoseconds (vDSO, ~30 ns here).
#ifndef VSTACK_LIB_CLOCK_H_
#define VSTACK_LIB_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace vstack {

inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace vstack

#endif  // VSTACK_LIB_CLOCK_H_
