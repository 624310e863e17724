// What write buffers hold, so that dedup and compression layers are measured honestly.
//
// Data is made of 4 KiB chunks (one chunk for smaller blocks). Every chunk starts from the same
// template: 16 bytes of tag, then random bytes, then zeros making up compress_pct of the chunk
// (so a chunk compresses to about (100 - compress_pct)% on its own). The tag makes a chunk
// unique: each write takes fresh tags, except that dedupe_pct of writes reuse the tags of an
// earlier write of the same thread (from its last kWorkingSetChunks chunks), so their data
// repeats it exactly, chunk by chunk, like fio's dedupe_percentage. Content kZeros writes zeros,
// kPattern the bytes 0, 1, ..., 255 repeating (diskspd's default), the same in every write.
//
// Writes only restamp the tags (two stores per chunk), so content costs almost nothing per I/O.
#ifndef VSTACK_BENCH_WORKLOAD_WRITE_CONTENT_H_
#define VSTACK_BENCH_WORKLOAD_WRITE_CONTENT_H_

#include <cstddef>
#include <cstdint>

#include "bench/workload/knobs.h"
#include "bench/workload/rng.h"

namespace vstack::bench {

class WriteContent {
 public:
  static constexpr uint32_t kChunk = 4096;
  static constexpr uint64_t kWorkingSetChunks = 4096;

  // Thread `thread` of a run with seed `seed`; tags never collide between threads.
  WriteContent(const WorkloadKnobs& k, uint32_t thread);

  // Fills a write buffer of `len` bytes with the template, once, before its first use.
  void Initialize(std::byte* buf, uint32_t len) const;
  // Stamps the tags of the next write into a buffer prepared by Initialize. Returns true if
  // this write repeats earlier data.
  bool Stamp(std::byte* buf, uint32_t len, WorkloadRng& rng);

 private:
  void StampTags(std::byte* buf, uint32_t len, uint64_t first_tag) const;

  Content content_;
  uint32_t dedupe_pct_;
  uint32_t random_bytes_;  // template bytes after the tag that are random
  uint64_t seed_;
  uint64_t tag_base_;      // thread << 48
  uint64_t next_tag_ = 0;  // chunks this thread has made unique so far
};

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_WRITE_CONTENT_H_
