#include "formats/vhd/vhd_bitmap.h"

namespace vstack::vhd {

void SetBits(uint8_t* bits, uint32_t first, uint32_t count) {
  uint32_t i = first;
  const uint32_t end = first + count;
  for (; i < end && (i & 7); ++i) bits[i >> 3] |= 0x80u >> (i & 7);
  for (; i + 8 <= end; i += 8) bits[i >> 3] = 0xFF;
  for (; i < end; ++i) bits[i >> 3] |= 0x80u >> (i & 7);
}

bool AllSet(const uint8_t* bits, uint32_t first, uint32_t count) {
  uint32_t i = first;
  const uint32_t end = first + count;
  for (; i < end && (i & 7); ++i) {
    if (!TestBit(bits, i)) return false;
  }
  for (; i + 8 <= end; i += 8) {
    if (bits[i >> 3] != 0xFF) return false;
  }
  for (; i < end; ++i) {
    if (!TestBit(bits, i)) return false;
  }
  return true;
}

uint32_t RunLength(const uint8_t* bits, uint32_t first, uint32_t limit) {
  const bool value = TestBit(bits, first);
  const uint8_t whole = value ? 0xFF : 0x00;
  uint32_t i = first + 1;
  while (i < limit) {
    if ((i & 7) == 0 && i + 8 <= limit && bits[i >> 3] == whole) {
      i += 8;
      continue;
    }
    if (TestBit(bits, i) != value) break;
    ++i;
  }
  return i - first;
}

uint32_t CountSet(const uint8_t* bits, uint32_t count) {
  uint32_t n = 0;
  uint32_t i = 0;
  for (; i + 8 <= count; i += 8) n += static_cast<uint32_t>(__builtin_popcount(bits[i >> 3]));
  for (; i < count; ++i) n += TestBit(bits, i) ? 1 : 0;
  return n;
}

}  // namespace vstack::vhd
