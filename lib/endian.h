// Big- and little-endian loads and stores for on-disk structures (VHD is big-endian).
#ifndef VSTACK_LIB_ENDIAN_H_
#define VSTACK_LIB_ENDIAN_H_

#include <cstdint>
#include <cstring>

namespace vstack {

inline uint16_t LoadBE16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return __builtin_bswap16(v);
}
inline uint32_t LoadBE32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return __builtin_bswap32(v);
}
inline uint64_t LoadBE64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}
inline void StoreBE16(void* p, uint16_t v) {
  v = __builtin_bswap16(v);
  std::memcpy(p, &v, 2);
}
inline void StoreBE32(void* p, uint32_t v) {
  v = __builtin_bswap32(v);
  std::memcpy(p, &v, 4);
}
inline void StoreBE64(void* p, uint64_t v) {
  v = __builtin_bswap64(v);
  std::memcpy(p, &v, 8);
}
inline uint32_t LoadLE32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t LoadLE64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void StoreLE32(void* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void StoreLE64(void* p, uint64_t v) { std::memcpy(p, &v, 8); }

}  // namespace vstack

#endif  // VSTACK_LIB_ENDIAN_H_
