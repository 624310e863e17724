// Helpers for scatter/gather lists (iovec arrays): length, slicing, copying and zero tests.
// Offsets are byte positions within the concatenation of the iovecs.
#ifndef VSTACK_LIB_IOVEC_H_
#define VSTACK_LIB_IOVEC_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

uint64_t IovLength(const iovec* iov, uint32_t iovcnt);

// Appends to `out` the iovecs covering bytes [offset, offset+length) of `iov`.
// REQUIRES: offset + length <= IovLength(iov, iovcnt).
void IovSlice(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length,
              std::vector<iovec>* out);

// Copies `length` bytes from `src` into the iovecs starting at `offset`.
void CopyToIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, const void* src,
               uint64_t length);
// Copies `length` bytes starting at `offset` of the iovecs into `dst`.
void CopyFromIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, void* dst, uint64_t length);
// Fills bytes [offset, offset+length) of the iovecs with zeros.
void ZeroIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length);

// True if `length` bytes at `data` are all zero. Fast path for 8-byte-aligned lengths.
bool IsZero(const void* data, size_t length);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_IOVEC_H_
