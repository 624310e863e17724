// A deterministic workload for crash tests: the same seed gives the same sequence of writes,
// write-zeroes and flushes with the same data, so a test can kill the process that ran it and
// still know what every write held. The data mixes repeated patterns (dedup hits), text-like
// data (compresses), random data and zeros.
#ifndef VSTACK_TESTS_TESTING_CRASH_WORKLOAD_H_
#define VSTACK_TESTS_TESTING_CRASH_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vstack::testing {

// splitmix64: deterministic per seed, and free of gtest so the writer process can use it.
class WorkloadRng {
 public:
  explicit WorkloadRng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t Below(uint64_t n) { return n ? Next() % n : 0; }
  void Fill(void* data, size_t len);

 private:
  uint64_t s_;
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
