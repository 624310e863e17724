// Grain fingerprints for deduplication: XXH3-128 (libxxhash, private to this folder) and the
// all-zero test that runs before it. The dedup layer classifies every grain it writes with
// ClassifyGrain / ClassifyGrainIov, and the space analysis (analysis/space, `vstack space
// --mode=scan`) calls ClassifyGrain too, so scan and replay classify every grain the same way.
#ifndef VSTACK_BLOCKDEV_DEDUP_FINGERPRINT_H_
#define VSTACK_BLOCKDEV_DEDUP_FINGERPRINT_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

namespace vstack {

struct Fingerprint {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const Fingerprint&) const = default;
};

// XXH3-128 of `len` bytes (seed 0).
Fingerprint FingerprintOf(const void* data, size_t len);
// XXH3-128 of bytes [offset, offset+length) of an iovec array; equal to FingerprintOf of the
// same bytes laid out contiguously.
Fingerprint FingerprintIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length);
// True if bytes [offset, offset+length) of the iovecs are all zero. Non-zero data usually
// exits within the first 64 bytes.
bool IsZeroIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length);

// The dedup layer's first step for one grain of `len` bytes: false if it is all zeros (stored
// as nothing, no fingerprint taken); else true with its fingerprint in `*fp`.
bool ClassifyGrain(const void* grain, size_t len, Fingerprint* fp);
// The same for bytes [offset, offset+length) of an iovec array.
bool ClassifyGrainIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length,
                      Fingerprint* fp);

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_DEDUP_FINGERPRINT_H_
