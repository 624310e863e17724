// The conformance suite's list of targets: every backend and every registered stack. A layer
// joins the suite by adding targets (usually with SpecTarget) in tests/conformance/targets.cc
// or with VSTACK_CONFORMANCE_TARGETS in its own test file.
#ifndef VSTACK_TESTS_TESTING_CONFORMANCE_H_
#define VSTACK_TESTS_TESTING_CONFORMANCE_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "lib/block_device.h"

namespace vstack::testing {

struct ConformanceTarget {
  // Appears in test names: letters, digits and '_' only.
  std::string name;
  // Opens a fresh, never-written device of `kConformanceSize` bytes (or more) in `dir`.
  std::function<Result<DevicePtr>(const std::string& dir)> open;
  // Reopens what `open` created in `dir`, for persistence tests; empty if not persistent.
  std::function<Result<DevicePtr>(const std::string& dir)> reopen;
  // False for devices that drop writes (null).
  bool stores_data = true;
};

// Test names print the target's name, not its bytes.
inline void PrintTo(const ConformanceTarget& t, std::ostream* os) { *os << t.name; }

inline constexpr uint64_t kConformanceSize = 64ull << 20;

// A target built from spec templates, where "{dir}" is replaced by the test's directory.
// `reopen_spec` may be empty (not persistent).
ConformanceTarget SpecTarget(std::string name, std::string spec, std::string reopen_spec = "",
                             std::function<void(const std::string& dir)> prepare = nullptr);

std::vector<ConformanceTarget>& ConformanceTargets();

// Adds targets from a static initialiser: VSTACK_CONFORMANCE_TARGETS(vhd, { ... });
struct ConformanceRegistrar {
  explicit ConformanceRegistrar(std::vector<ConformanceTarget> targets);
};
#define VSTACK_CONFORMANCE_TARGETS(ident, ...)                                   \
  static ::vstack::testing::ConformanceRegistrar vstack_conformance_##ident( \
      std::vector<::vstack::testing::ConformanceTarget> __VA_ARGS__)

}  // namespace vstack::testing

#endif  // VSTACK_TESTS_TESTING_CONFORMANCE_H_
