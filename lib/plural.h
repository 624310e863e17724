// Counted nouns in messages: "1 entry", "2 entries", never "1 entries".
#ifndef VSTACK_LIB_PLURAL_H_
#define VSTACK_LIB_PLURAL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace vstack {

// "<n> <one>" for n == 1, else "<n> <many>": Counted(1, "entry", "entries") is "1 entry".
inline std::string Counted(uint64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

}  // namespace vstack

#endif  // VSTACK_LIB_PLURAL_H_
