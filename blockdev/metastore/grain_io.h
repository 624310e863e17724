// Small helpers of the grain queue: buffers for one queue, and questions about a caller's
// iovecs (can they go down as they are? are they one piece?).
#ifndef VSTACK_BLOCKDEV_METASTORE_GRAIN_IO_H_
#define VSTACK_BLOCKDEV_METASTORE_GRAIN_IO_H_

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "lib/aligned_buffer.h"

namespace vstack {

// True if every piece of bytes [offset, offset+length) of the iovecs is aligned to `align` in
// address and length (so they can be handed to a device with that memory alignment).
bool SliceAligned(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length,
                  uint64_t align);

// The address of bytes [offset, offset+length) if they lie in one iovec, else nullptr.
char* ContiguousSlice(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length);

// Reusable buffers for one queue (owner thread only): a buffer of at least `size` bytes (its
// size the next power of two, at least 4 KiB), and back. Buffers are never freed before the
// pool, so nothing is allocated once it is warm.
class BufferPool {
 public:
  explicit BufferPool(uint64_t alignment) : alignment_(alignment), free_(64) {}
  AlignedBuffer* Get(uint64_t size);
  // Returns `b` to the pool (if not null) and clears it. Inline: most slots hold none.
  void Put(AlignedBuffer*& b) {
    if (b) Return(b);
    b = nullptr;
  }

 private:
  void Return(AlignedBuffer* b);
  uint64_t alignment_;
  std::vector<std::unique_ptr<AlignedBuffer>> all_;
  std::vector<std::vector<AlignedBuffer*>> free_;  // by size class (log2)
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_GRAIN_IO_H_
