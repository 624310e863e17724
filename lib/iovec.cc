#include "lib/iovec.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace vstack {
namespace {

// Calls fn(pointer, length, position) for each piece of [offset, offset+length).
template <typename Fn>
void ForEachPiece(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length, Fn fn) {
  uint64_t pos = 0;
  for (uint32_t i = 0; i < iovcnt && length > 0; ++i) {
    const uint64_t len = iov[i].iov_len;
    if (offset >= len) {
      offset -= len;
      continue;
    }
    const uint64_t take = std::min(len - offset, length);
    fn(static_cast<char*>(iov[i].iov_base) + offset, take, pos);
    pos += take;
    length -= take;
    offset = 0;
  }
  assert(length == 0 && "iovec range out of bounds");
}

}  // namespace

uint64_t IovLength(const iovec* iov, uint32_t iovcnt) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  return total;
}

void IovSlice(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length,
              std::vector<iovec>* out) {
  ForEachPiece(iov, iovcnt, offset, length, [out](char* p, uint64_t len, uint64_t) {
    out->push_back(iovec{p, static_cast<size_t>(len)});
  });
}

void CopyToIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, const void* src,
               uint64_t length) {
  const char* s = static_cast<const char*>(src);
  ForEachPiece(iov, iovcnt, offset, length,
               [s](char* p, uint64_t len, uint64_t pos) { std::memcpy(p, s + pos, len); });
}

void CopyFromIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, void* dst, uint64_t length) {
  char* d = static_cast<char*>(dst);
  ForEachPiece(iov, iovcnt, offset, length,
               [d](char* p, uint64_t len, uint64_t pos) { std::memcpy(d + pos, p, len); });
}

void ZeroIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length) {
  ForEachPiece(iov, iovcnt, offset, length,
               [](char* p, uint64_t len, uint64_t) { std::memset(p, 0, len); });
}

bool IsZero(const void* data, size_t length) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  // Check 64 bytes per step with OR-accumulation; the compiler vectorises this loop.
  for (; i + 64 <= length; i += 64) {
    uint64_t acc = 0;
    for (int k = 0; k < 8; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      acc |= w;
    }
    if (acc) return false;
  }
  for (; i < length; ++i) {
    if (p[i]) return false;
  }
  return true;
}

}  // namespace vstack
