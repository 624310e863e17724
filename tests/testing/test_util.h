// Shared test helpers: status assertions that print the error, temporary directories, a fast
// deterministic RNG, patterned buffers and a batch runner that checks every request completes
// exactly once.
#ifndef VSTACK_TESTS_TESTING_TEST_UTIL_H_
#define VSTACK_TESTS_TESTING_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/block_device.h"
#include "lib/errors.h"

namespace vstack::testing {

inline ::testing::AssertionResult IsOk(const Status& s) {
  if (s) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.error().ToString();
}
template <typename T>
::testing::AssertionResult IsOk(const Result<T>& r) {
  if (r) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.error().ToString();
}
inline ::testing::AssertionResult IsOk(const std::error_code& ec) {
  if (!ec) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << ec.category().name() << ":" << ec.value() << " "
                                       << ec.message();
}

#define ASSERT_OK(expr) ASSERT_TRUE(::vstack::testing::IsOk(expr))
#define EXPECT_OK(expr) EXPECT_TRUE(::vstack::testing::IsOk(expr))

// A fresh directory under $TMPDIR (or /var/tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// xorshift64*: fast, deterministic per seed.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t Next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  // Uniform in [0, n).
  uint64_t Below(uint64_t n) { return n ? Next() % n : 0; }
  void Fill(void* data, size_t len);

 private:
  uint64_t s_;
};

// An aligned buffer of `len` bytes filled from `rng`.
AlignedBuffer RandomBuffer(Rng& rng, size_t len, size_t alignment = 4096);

// Submits all `reqs` in one batch and polls until every one has completed. Fails the test if
// any callback runs more than once. Returns the number of callbacks that ran.
size_t RunBatch(IoQueue& queue, std::vector<IoRequest>& reqs);

// The result of running a shell command: exit status (-1 if it did not exit normally) and its
// stdout and stderr, interleaved.
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult RunCommand(const std::string& command);
// Runs the vstack CLI built alongside the tests with `args`.
CommandResult RunVstack(const std::string& args);
// True if `program` is on PATH (interop tests need qemu-img, fio, ...; the README set-up
// installs them, so their absence is a failure there, but unit runs elsewhere may skip).
bool HaveProgram(const std::string& program);

// A size-limited tmpfs mounted at `dir` (created) for the object's life, to fill a filesystem
// (root only, as in CI; mounted() says whether it worked, so that a test can skip).
class SmallFilesystem {
 public:
  SmallFilesystem(const std::string& dir, const std::string& size);
  ~SmallFilesystem();
  SmallFilesystem(const SmallFilesystem&) = delete;
  SmallFilesystem& operator=(const SmallFilesystem&) = delete;
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// Creates a file of `size` bytes filled with `byte`.
void WriteFile(const std::string& path, uint64_t size, unsigned char byte);

// This process's resident set, in bytes (/proc/self/statm): for tests that bound the memory a
// call takes by what was written, not by what a header or a size claims.
uint64_t ResidentBytes();
// True in an AddressSanitizer or ThreadSanitizer build, whose allocators pad, shadow and
// quarantine memory and slow every thread: bounds on resident memory or CPU shares do not
// hold there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif
// The process's peak resident memory (VmHWM) since the last ResetPeakResident(): what a step
// needed at its height, which ResidentBytes() after it misses when the step freed its copies.
void ResetPeakResident();
uint64_t PeakResidentBytes();

}  // namespace vstack::testing

#endif  // VSTACK_TESTS_TESTING_TEST_UTIL_H_
