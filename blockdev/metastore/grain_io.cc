#include "blockdev/metastore/grain_io.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "lib/iovec.h"

namespace vstack {

bool SliceAligned(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length,
                  uint64_t align) {
  if (align <= 1) return true;
  for (uint32_t i = 0; i < iovcnt && length > 0; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    const uint64_t take = std::min<uint64_t>(iov[i].iov_len - offset, length);
    const uintptr_t base = reinterpret_cast<uintptr_t>(iov[i].iov_base) + offset;
    if ((base | take) & (align - 1)) return false;
    length -= take;
    offset = 0;
  }
  return true;
}

char* ContiguousSlice(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length) {
  for (uint32_t i = 0; i < iovcnt; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    return iov[i].iov_len - offset >= length ? static_cast<char*>(iov[i].iov_base) + offset
                                             : nullptr;
  }
  return nullptr;
}

AlignedBuffer* BufferPool::Get(uint64_t size) {
  const unsigned cls = std::bit_width(std::max<uint64_t>(size, 4096) - 1);
  if (free_[cls].empty()) {
    all_.push_back(std::make_unique<AlignedBuffer>(uint64_t{1} << cls, alignment_));
    return all_.back().get();
  }
  AlignedBuffer* b = free_[cls].back();
  free_[cls].pop_back();
  return b;
}

void BufferPool::Return(AlignedBuffer* b) { free_[std::bit_width(b->size() - 1)].push_back(b); }

}  // namespace vstack
