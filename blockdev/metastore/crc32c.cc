#include "blockdev/metastore/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace vstack {

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t len) {
  // crc32_iscsi works on the un-inverted register and takes an int length.
  uint32_t reg = ~crc;
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  while (len > 0) {
    const int n = len > static_cast<size_t>(INT_MAX) ? (INT_MAX & ~4095) : static_cast<int>(len);
    reg = crc32_iscsi(p, n, reg);
    p += n;
    len -= static_cast<size_t>(n);
  }
  return ~reg;
}

uint32_t Crc32c(const void* data, size_t len) { return Crc32cExtend(0, data, len); }

uint32_t Crc32cIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length) {
  uint32_t crc = 0;
  for (uint32_t i = 0; i < iovcnt && length > 0; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    const uint64_t take = std::min<uint64_t>(iov[i].iov_len - offset, length);
    crc = Crc32cExtend(crc, static_cast<const char*>(iov[i].iov_base) + offset, take);
    length -= take;
    offset = 0;
  }
  return crc;
}

}  // namespace vstack
