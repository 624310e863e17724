#include "bench/workload/write_content.h"

#include <algorithm>
#include <cstring>

namespace vstack::bench {
namespace {
constexpr uint32_t kTagBytes = 16;
}  // namespace

WriteContent::WriteContent(const WorkloadKnobs& k, uint32_t thread)
    : content_(k.content),
      dedupe_pct_(k.dedupe_pct),
      seed_(k.seed),
      tag_base_(static_cast<uint64_t>(thread) << 48) {
  const uint32_t keep = kChunk * (100 - k.compress_pct) / 100;
  random_bytes_ = keep > kTagBytes ? keep - kTagBytes : 0;
}

void WriteContent::Initialize(std::byte* buf, uint32_t len) const {
  std::memset(buf, 0, len);
  if (content_ == Content::kZeros) return;
  if (content_ == Content::kPattern) {
    for (uint32_t i = 0; i < len; ++i) buf[i] = static_cast<std::byte>(i & 0xff);
    return;
  }
  // The same template for every chunk of every buffer of every thread: only tags differ.
  WorkloadRng rng(seed_, 0x7e3a1a7e);
  std::byte chunk[kChunk] = {};
  for (uint32_t i = kTagBytes; i < kTagBytes + random_bytes_; i += 8) {
    const uint64_t v = rng.Next();
    std::memcpy(chunk + i, &v, std::min<uint32_t>(8, kTagBytes + random_bytes_ - i));
  }
  for (uint32_t off = 0; off < len; off += kChunk) {
    std::memcpy(buf + off, chunk, std::min(kChunk, len - off));
  }
}

void WriteContent::StampTags(std::byte* buf, uint32_t len, uint64_t first_tag) const {
  uint64_t tag = first_tag;
  for (uint32_t off = 0; off < len; off += kChunk, ++tag) {
    const uint64_t words[2] = {tag_base_ | tag, Mix64(tag_base_ ^ tag ^ seed_)};
    std::memcpy(buf + off, words, std::min<uint32_t>(kTagBytes, len - off));
  }
}

bool WriteContent::Stamp(std::byte* buf, uint32_t len, WorkloadRng& rng) {
  if (content_ != Content::kRandom) return false;
  const uint64_t chunks = (len + kChunk - 1) / kChunk;
  if (dedupe_pct_ != 0 && next_tag_ >= chunks && rng.Below(100) < dedupe_pct_) {
    // Repeat an earlier write: a run of `chunks` tags that were all issued before.
    const uint64_t window = std::min<uint64_t>(next_tag_ - chunks + 1, kWorkingSetChunks);
    StampTags(buf, len, next_tag_ - chunks - rng.Below(window) );
    return true;
  }
  StampTags(buf, len, next_tag_);
  next_tag_ += chunks;
  return false;
}

}  // namespace vstack::bench
