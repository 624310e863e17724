// A deterministic workload for crash tests: the same seed gives the same sequence of writes,
// write-zeroes and flushes with the same data, so a test can kill the process that ran it and
// still know what every write held. The data mixes repeated patterns (dedup hits), text-like
// data (compresses), random data and zeros.
#ifndef VSTACK_TESTS_TESTING_CRASH_WORKLOAD_H_
#define VSTACK_TESTS_TESTING_CRASH_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "blockdev/sim/sim_rng.h"

namespace vstack::testing {

// splitmix64 (the simulator's generator): deterministic per seed, and free of gtest so the
// writer process can use it.
class WorkloadRng : public sim::SimRng {
 public:
  using SimRng::SimRng;
  void Fill(void* data, size_t len);
};

// Fills `len` bytes with the mix above, 4 KiB at a time.
void FillMixed(WorkloadRng& rng, unsigned char* p, size_t len);

struct WorkloadOp {
  enum Kind { kWrite, kZeroes, kFlush };
  Kind kind = kWrite;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::vector<unsigned char> data;  // kWrite
};

class CrashWorkload {
 public:
  // Ops over bytes [0, span) of a device, in 512-byte units; a flush every `flush_every` ops.
  CrashWorkload(uint64_t seed, uint64_t span, int flush_every = 8)
      : rng_(seed), span_(span), flush_every_(flush_every) {}
  WorkloadOp Next();

 private:
  WorkloadRng rng_;
  uint64_t span_;
  int flush_every_;
  uint64_t count_ = 0;
};

}  // namespace vstack::testing

#endif  // VSTACK_TESTS_TESTING_CRASH_WORKLOAD_H_
