// UnwrittenOrigin: where a device's bytes come from at an offset that nothing has written
// through the device since it was made (created, or formatted), as BlockDevice::OriginOfUnwritten
// reports it: zeros the device makes up, the bytes another device shows (the one below, or a
// differencing disk's parent) at some offset, or unknown.
//
// A fixed VHD over a device that already holds data shows that data; a dynamic one shows zeros.
// `vstack sim` follows the origins of a new stack's top device down to bytes it knows (zeros,
// the parent it filled), so that its model starts from what the stack really shows, without
// reading through the stack under test.
#ifndef VSTACK_LIB_UNWRITTEN_ORIGIN_H_
#define VSTACK_LIB_UNWRITTEN_ORIGIN_H_

#include <cstdint>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

class BlockDevice;

struct UnwrittenOrigin {
  enum class Kind : uint8_t {
    kUnknown,  // the device does not say (the default): its bytes are transformed or its own
    kZeros,    // they read as zeros
    kDevice,   // they read as `device`'s bytes at `offset` on
  };
  Kind kind = Kind::kUnknown;
  // kDevice: the device whose bytes show through, and where. Making this device wrote nothing
  // there (a layer whose format zeroes the device below reports kZeros, not the device below).
  const BlockDevice* device = nullptr;
  uint64_t offset = 0;
  // How many bytes from the offset asked about on this origin holds for, in order (kDevice: the
  // next bytes of `device`); 0 for kUnknown.
  uint64_t length = 0;

  static UnwrittenOrigin Zeros(uint64_t length) { return {Kind::kZeros, nullptr, 0, length}; }
  static UnwrittenOrigin Of(const BlockDevice& device, uint64_t offset, uint64_t length) {
    return {Kind::kDevice, &device, offset, length};
  }
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_UNWRITTEN_ORIGIN_H_
