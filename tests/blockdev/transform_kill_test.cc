// Kill -9 in the middle of a run: vstack_crash_writer (tests/testing/crash_writer.cc) writes a
// deterministic workload through a stack of transform layers over a file and reports every
// completed request; the test kills it with SIGKILL at an arbitrary point, reopens the stack and
// requires that every block holds what the last acknowledged flush left or something written
// after it, and that Check() finds neither corruption nor leaks. (The page cache keeps what the
// process wrote, so this tests the on-disk state a process crash leaves, not a power loss:
// transform_crash_test.cc does that.)
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string_view>

#include "lib/registry.h"
#include "tests/testing/crash_workload.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/test_util.h"

extern char** environ;

namespace vstack::testing {
namespace {

constexpr uint64_t kBlock = 512;
constexpr uint64_t kSpan = 4 << 20;

struct KillParam {
  std::string name;
  std::string layers;
  std::string backend;  // "file" or "uring"
  std::string lower_size;
};

void PrintTo(const KillParam& p, std::ostream* os) { *os << p.name; }

uint64_t HashBlock(const unsigned char* p) {
  return std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(p), kBlock));
}

class TransformKill : public ::testing::TestWithParam<KillParam> {};

TEST_P(TransformKill, SigkillMidRunThenReopen) {
  const KillParam& P = GetParam();
  TempDir dir;
  const std::string path = dir.File("disk.img");
  const std::string create = P.layers + "+" + P.backend + ":" + path + ",create=on,size=" + P.lower_size;
  const std::string reopen = P.layers + "+" + P.backend + ":" + path;
  const uint64_t seed = 1234;

  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipefd[0]);
  const std::string seed_s = std::to_string(seed), span_s = std::to_string(kSpan);
  char* argv[] = {const_cast<char*>(VSTACK_CRASH_WRITER), const_cast<char*>(create.c_str()),
                  const_cast<char*>(seed_s.c_str()), const_cast<char*>(span_s.c_str()), nullptr};
  pid_t pid;
  ASSERT_EQ(posix_spawn(&pid, VSTACK_CRASH_WRITER, &actions, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipefd[1]);

  // Let it acknowledge some flushes, then kill it a few requests later, mid-run.
  FILE* out = ::fdopen(pipefd[0], "r");
  ASSERT_NE(out, nullptr);
  int64_t last_flushed = -1, last_done = -1, flushes = 0, after = -1;
  char line[128];
  while (std::fgets(line, sizeof line, out)) {
    unsigned long long n = 0;
    if (std::sscanf(line, "flushed %llu", &n) == 1) {
      last_flushed = last_done = static_cast<int64_t>(n);
      if (++flushes == 24) after = static_cast<int64_t>(seed % 7);
    } else if (std::sscanf(line, "done %llu", &n) == 1) {
      last_done = static_cast<int64_t>(n);
    }
    if (after >= 0 && after-- == 0) break;
  }
  ::kill(pid, SIGKILL);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  // Anything it printed before dying was acknowledged too.
  while (std::fgets(line, sizeof line, out)) {
    unsigned long long n = 0;
    if (std::sscanf(line, "flushed %llu", &n) == 1) last_flushed = last_done = static_cast<int64_t>(n);
    if (std::sscanf(line, "done %llu", &n) == 1) last_done = static_cast<int64_t>(n);
  }
  std::fclose(out);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the writer exited on its own (status " << wstatus << ")";
  ASSERT_GE(last_flushed, 0) << "the writer never flushed";

  // What each block may hold: its value after the last write before the acknowledged flush, or
  // any value written after it (including the request in flight when it died).
  const uint64_t blocks = kSpan / kBlock;
  std::vector<unsigned char> zero(kBlock, 0);
  std::vector<std::vector<uint64_t>> allowed(blocks, std::vector<uint64_t>{HashBlock(zero.data())});
  CrashWorkload workload(seed, kSpan);
  for (int64_t i = 0; i <= last_done + 1; ++i) {
    const WorkloadOp op = workload.Next();
    if (op.kind == WorkloadOp::kFlush) continue;
    for (uint64_t b = 0; b < op.length / kBlock; ++b) {
      const uint64_t h = op.kind == WorkloadOp::kWrite ? HashBlock(&op.data[b * kBlock])
                                                       : HashBlock(zero.data());
      auto& a = allowed[op.offset / kBlock + b];
      if (i < last_flushed) a.clear();  // overwritten before the durable flush
      a.push_back(h);
    }
  }

  // The killed process's io_uring instance is torn down asynchronously and keeps the file (and
  // its lock) for a moment after waitpid.
  auto dev = Open(reopen);
  auto in_use = [&] {
    return !dev && dev.error().message.find("in use by another process") != std::string::npos;
  };
  for (int i = 0; i < 100 && in_use(); ++i) {
    ::usleep(50 * 1000);
    dev = Open(reopen);
  }
  ASSERT_OK(dev);
  std::vector<unsigned char> data = ReadAll(**dev);
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint64_t h = HashBlock(&data[b * kBlock]);
    const auto& a = allowed[b];
    ASSERT_NE(std::find(a.begin(), a.end(), h), a.end())
        << "block " << b << " (offset " << b * kBlock << ") holds a value never allowed; last "
        << "acknowledged flush: op " << last_flushed << ", last completed op " << last_done;
  }
  const CheckResult check = CheckStack(**dev);
  EXPECT_EQ(check.corruptions, 0u) << (check.messages.empty() ? "" : check.messages[0]);
  EXPECT_EQ(check.leaks, 0u) << (check.messages.empty() ? "" : check.messages[0]);
}

INSTANTIATE_TEST_SUITE_P(
    Layers, TransformKill,
    ::testing::Values(KillParam{"dedup_zstd_file", "dedup+zstd", "file", "48M"},
                      KillParam{"crc32c_file", "crc32c", "file", "16M"},
                      KillParam{"crc32c_dedup_zstd_packed_uring", "crc32c+dedup+zstd:rule=packed",
                                "uring", "48M"}),
    [](const ::testing::TestParamInfo<KillParam>& i) { return i.param.name; });

}  // namespace
}  // namespace vstack::testing
