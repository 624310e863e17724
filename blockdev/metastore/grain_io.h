// Small helpers the transform layers' queues share: grain-sized buffers for one queue, and
// questions about a caller's iovecs (can they go down as they are? are they one piece? do
// they hold these bytes?).
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

// True if `length` bytes at `buf` equal bytes [offset, offset+length) of the iovecs.
bool EqualsIov(const void* buf, const iovec* iov, uint32_t iovcnt, uint64_t offset,
               uint64_t length);

// Reusable buffers of one size for one queue (owner thread only). Buffers are never freed
// before the pool.
class BufferPool {
 public:
  BufferPool(uint64_t size, uint64_t alignment) : size_(size), alignment_(alignment) {}
  AlignedBuffer* Get();
  // Returns `b` to the pool (if not null) and clears it.
  void Put(AlignedBuffer*& b);

 private:
  uint64_t size_, alignment_;
  std::vector<std::unique_ptr<AlignedBuffer>> all_;
  std::vector<AlignedBuffer*> free_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_GRAIN_IO_H_
