#include "blockdev/dedup/fingerprint.h"

#include <xxhash.h>
// The x86 build of libxxhash picks its widest vector code (SSE2, AVX2, AVX-512) at run time
// only through these names (XXH3_128bits -> XXH3_128bits_dispatch): 2.5x faster than the SSE2
// default on an AVX2 machine, with the same values.
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

#include <algorithm>

#include "lib/iovec.h"

namespace vstack {

Fingerprint FingerprintOf(const void* data, size_t len) {
  const XXH128_hash_t h = XXH3_128bits(data, len);
  return Fingerprint{h.low64, h.high64};
}

Fingerprint FingerprintIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length) {
  // Fast path: the range lies in one iovec (the common case: one buffer per request).
  for (uint32_t i = 0; i < iovcnt; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    if (iov[i].iov_len - offset >= length) {
      return FingerprintOf(static_cast<const char*>(iov[i].iov_base) + offset, length);
    }
    // Spans several iovecs: stream them.
    // The state lives on the heap (its layout is not part of the public API); this path is rare.
    XXH3_state_t* state = XXH3_createState();
    XXH3_128bits_reset(state);
    for (; i < iovcnt && length > 0; ++i) {
      const uint64_t take = std::min<uint64_t>(iov[i].iov_len - offset, length);
      XXH3_128bits_update(state, static_cast<const char*>(iov[i].iov_base) + offset, take);
      length -= take;
      offset = 0;
    }
    const XXH128_hash_t h = XXH3_128bits_digest(state);
    XXH3_freeState(state);
    return Fingerprint{h.low64, h.high64};
  }
  return FingerprintOf(nullptr, 0);
}

bool IsZeroIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length) {
  for (uint32_t i = 0; i < iovcnt && length > 0; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    const uint64_t take = std::min<uint64_t>(iov[i].iov_len - offset, length);
    if (!IsZero(static_cast<const char*>(iov[i].iov_base) + offset, take)) return false;
    length -= take;
    offset = 0;
  }
  return true;
}

bool ClassifyGrain(const void* grain, size_t len, Fingerprint* fp) {
  if (IsZero(grain, len)) return false;
  *fp = FingerprintOf(grain, len);
  return true;
}

bool ClassifyGrainIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length,
                      Fingerprint* fp) {
  if (IsZeroIov(iov, iovcnt, offset, length)) return false;
  *fp = FingerprintIov(iov, iovcnt, offset, length);
  return true;
}

}  // namespace vstack
