// Which of a fuzz target's modes (ways of opening and using the input) an input runs.
//
// Under libFuzzer, which calls the target's LLVMFuzzerInitialize (and there SetOneModePerInput),
// an input runs one mode, picked by a hash of its bytes: an execution pays for one device open
// rather than for all of them, and since any mutation changes the hash, every mode still sees
// every kind of input. The seed replayer (replay_main.cc) never calls LLVMFuzzerInitialize, so
// there every seed runs every mode.
#ifndef VSTACK_TESTS_FUZZ_FUZZ_MODE_H_
#define VSTACK_TESTS_FUZZ_FUZZ_MODE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

namespace vstack::fuzz {

inline bool& OneModePerInputFlag() {
  static bool one = false;
  return one;
}

inline void SetOneModePerInput() { OneModePerInputFlag() = true; }

// True if the input runs mode `mode` (0 <= mode < `modes`).
inline bool RunsMode(const uint8_t* data, size_t size, int mode, int modes) {
  if (!OneModePerInputFlag()) return true;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  return std::hash<std::string_view>{}(bytes) % modes == static_cast<size_t>(mode);
}

}  // namespace vstack::fuzz

#endif  // VSTACK_TESTS_FUZZ_FUZZ_MODE_H_
