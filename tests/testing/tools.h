// The one policy for tests that need an external program (an oracle such as qemu-img,
// qemu-io, fio or nbdkit): where the README set-up installed the tools, a missing one fails the
// test; elsewhere the test is skipped, with the reason.
#ifndef VSTACK_TESTS_TESTING_TOOLS_H_
#define VSTACK_TESTS_TESTING_TOOLS_H_

#include <gtest/gtest.h>

#include <string>

#include "tests/testing/test_util.h"

namespace vstack::testing {

// True where every tool the README set-up installs must be present: in CI (CI=true) and under
// `./dev.sh test` (VSTACK_REQUIRE_TOOLS=1). There a missing oracle fails the test; elsewhere a
// test that needs one skips, with the reason.
bool ToolsRequired();

// Fails the test when tools are required and `program` is not on PATH, skips it otherwise.
// Use in a test body or SetUp(); `package` is the Debian package that dev.sh installs.
#define VSTACK_REQUIRE_PROGRAM(program, package)                                             \
  do {                                                                                      \
    const std::string vstack_program_ = (program);                                          \
    if (!::vstack::testing::HaveProgram(vstack_program_)) {                                 \
      if (::vstack::testing::ToolsRequired()) {                                             \
        GTEST_FAIL() << vstack_program_ << " is missing: ./dev.sh installs " << (package);  \
      }                                                                                     \
      GTEST_SKIP() << vstack_program_ << " is not installed (./dev.sh installs " << (package) \
                   << "; with CI=true or VSTACK_REQUIRE_TOOLS=1 this fails)";             \
    }                                                                                       \
  } while (0)

}  // namespace vstack::testing

#endif  // VSTACK_TESTS_TESTING_TOOLS_H_
