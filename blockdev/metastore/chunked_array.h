// ChunkedArray<T>: an array indexed by grain number whose memory is allocated in chunks of
// 2^12 entries on first write, so a layer over a mostly empty 1 TiB device holds only the
// chunks it has touched. Entries of chunks never written read as T{}. Not thread-safe.
#ifndef VSTACK_BLOCKDEV_METASTORE_CHUNKED_ARRAY_H_
#define VSTACK_BLOCKDEV_METASTORE_CHUNKED_ARRAY_H_

#include <cstdint>
#include <memory>
#include <vector>

namespace vstack {

template <typename T>
class ChunkedArray {
 public:
  static constexpr int kChunkBits = 12;
  static constexpr uint64_t kChunk = uint64_t{1} << kChunkBits;

  explicit ChunkedArray(uint64_t size = 0) : size_(size), chunks_((size + kChunk - 1) / kChunk) {}

  uint64_t size() const { return size_; }
  // The entry, or T{} if its chunk was never written. REQUIRES: i < size().
  T Get(uint64_t i) const {
    const auto& c = chunks_[i >> kChunkBits];
    return c ? c[i & (kChunk - 1)] : T{};
  }
  // A writable reference, allocating the chunk (zero-initialised) if needed.
  T& At(uint64_t i) {
    auto& c = chunks_[i >> kChunkBits];
    if (!c) {
      c = std::make_unique<T[]>(kChunk);
      ++allocated_;
    }
    return c[i & (kChunk - 1)];
  }
  // Chunk `c` (entries [c * kChunk, (c+1) * kChunk)), or nullptr if never written.
  const T* ChunkData(uint64_t c) const { return chunks_[c].get(); }
  uint64_t chunks() const { return chunks_.size(); }
  uint64_t memory_bytes() const {
    return allocated_ * kChunk * sizeof(T) + chunks_.capacity() * sizeof(chunks_[0]);
  }

 private:
  uint64_t size_;
  uint64_t allocated_ = 0;
  std::vector<std::unique_ptr<T[]>> chunks_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_CHUNKED_ARRAY_H_
