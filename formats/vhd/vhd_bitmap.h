// Sector bitmaps of dynamic VHD blocks: one bit per 512-byte sector, most significant bit
// first (sector i is byte i / 8, mask 0x80 >> (i % 8)). For a dynamic disk a set bit means the
// sector has been written; clear bits read as zeros.
#ifndef VSTACK_FORMATS_VHD_VHD_BITMAP_H_
#define VSTACK_FORMATS_VHD_VHD_BITMAP_H_

#include <cstdint>

namespace vstack::vhd {

inline bool TestBit(const uint8_t* bits, uint32_t i) { return bits[i >> 3] & (0x80u >> (i & 7)); }

// Sets bits [first, first + count).
void SetBits(uint8_t* bits, uint32_t first, uint32_t count);

// True if every bit of [first, first + count) is set.
bool AllSet(const uint8_t* bits, uint32_t first, uint32_t count);

// The number of bits from `first` (at most `limit - first`) equal to the bit at `first`.
uint32_t RunLength(const uint8_t* bits, uint32_t first, uint32_t limit);

// The number of set bits among the first `count`.
uint32_t CountSet(const uint8_t* bits, uint32_t count);

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_BITMAP_H_
