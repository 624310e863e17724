// `vstack serve` as a command: a file it cannot write gets nbdkit's error and the way out
// (--read-only); a clean stop leaves no socket file behind; SIGTERM stops an idle server at once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tests/nbd/server_process.h"
#include "tests/testing/test_util.h"

namespace vstack {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;

// A file this process can read but not write: as root, by serving it as user nobody.
TEST(ServeCli, AnUnwritableFileSaysToUseReadOnly) {
#if defined(__SANITIZE_ADDRESS__)
  // Under ASan, nbdkit (running the instrumented plugin as an unprivileged user) hangs in exit():
  // libp11-kit's destructor waits in freelocale for glibc's setlocale lock (gdb, 2026-12-04). The
  // message is vstack's and is checked by the normal build; the hang is outside vstack.
  GTEST_SKIP() << "nbdkit's exit deadlocks in libp11-kit under ASan; checked by the normal build";
#endif
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string img = dir.File("ro.img");
  testing::WriteFile(img, 1 << 20, 0);
  ASSERT_EQ(::chmod(img.c_str(), 0444), 0);
  std::string as_user;
  if (::geteuid() == 0) {
    ASSERT_TRUE(testing::HaveProgram("setpriv"));  // util-linux
    as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  const std::string serve = std::string(VSTACK_CLI) + " serve --socket " + dir.File("s.sock");
  CommandResult r = RunCommand(as_user + serve + " " + img);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("Permission denied"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("to serve it read-only, add --read-only to vstack serve"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.File("s.sock")));
  EXPECT_NE(r.output.find("vstack serve: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("nbdkit: error:"), std::string::npos) << r.output;
}

// Every error of the stack vstack serve opens reads like the other commands' ("vstack serve:"),
// not like nbdkit's own ("nbdkit: error:").
TEST(ServeCli, ErrorsSayVstackServe) {
  TempDir dir;
  const std::string serve = std::string(VSTACK_CLI) + " serve --socket " + dir.File("s.sock");
  for (const auto& [spec, says] : std::vector<std::pair<std::string, std::string>>{
           {"vhdd+memory:1M", "vstack serve: unknown layer 'vhdd'"},
           {"'dedup:grain=3K+memory:64M'", "vstack serve: dedup: option 'grain': 3072"},
           {dir.File("none.img"), "vstack serve: cannot open"}}) {
    CommandResult r = RunCommand(serve + " " + spec);
    EXPECT_NE(r.status, 0) << spec;
    EXPECT_NE(r.output.find(says), std::string::npos) << spec << "\n" << r.output;
    EXPECT_EQ(r.output.find("nbdkit: error:"), std::string::npos) << spec << "\n" << r.output;
  }
}

// So do the errors of its own options: a --stats file it cannot create, a --socket in a
// directory that does not exist or too long for a Unix socket (nbdkit's words, or none, before).
TEST(ServeCli, ErrorsOfItsOptionsSayVstackServe) {
  TempDir dir;
  const std::string serve = std::string(VSTACK_CLI) + " serve ";
  const std::string too_long = dir.File(std::string(120, 's') + ".sock");
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--socket " + dir.File("s.sock") + " --stats " + dir.File("none/st.json"),
            "vstack serve: --stats " + dir.File("none/st.json") +
                ": cannot write it: No such file or directory"},
           {"--socket " + dir.File("none/s.sock"), "vstack serve: --socket " +
                                                       dir.File("none/s.sock") + ": directory " +
                                                       dir.File("none") + " does not exist"},
           {"--socket " + too_long, "vstack serve: --socket path is too long ("}}) {
    CommandResult r = RunCommand(serve + args + " memory:1M");
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find("nbdkit"), std::string::npos) << args << "\n" << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.File("s.sock")));
}

// A mistyped layer, backend or option name is a usage error (exit status 2), found before
// nbdkit starts, as the other commands find it; a path that does not exist is not (1).
TEST(ServeCli, AMistypedNameIsAUsageError) {
  TempDir dir;
  const std::string serve = std::string(VSTACK_CLI) + " serve --socket " + dir.File("s.sock");
  for (const auto& [spec, status] : std::vector<std::pair<std::string, int>>{
           {"vhdd+memory:1M", 2},
           {"memory:1M+vhd", 2},
           {"'dedup:grian=4K+memory:64M'", 2},
           {"memroy:1M", 2},
           {dir.File("none.img"), 1}}) {
    CommandResult r = RunCommand(serve + " " + spec);
    EXPECT_EQ(r.status, status) << spec << "\n" << r.output;
    EXPECT_EQ(r.output.find("nbdkit"), std::string::npos) << spec << "\n" << r.output;
  }
  CommandResult r = RunCommand(serve + " 'dedup:grian=4K+memory:64M'");
  EXPECT_NE(r.output.find("did you mean `grain`"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.File("s.sock")));
}

TEST(ServeCli, ACleanStopRemovesTheSocketFile) {
  TempDir dir;
  for (int sig : {SIGTERM, SIGINT}) {
    auto server = testing::StartVstackServe(dir.path(), "memory:1M");
    ASSERT_TRUE(server);
    ASSERT_TRUE(std::filesystem::exists(testing::ServeSocket(dir.path())));
    EXPECT_EQ(server->Stop(sig), 0) << server->Log();
    EXPECT_FALSE(std::filesystem::exists(testing::ServeSocket(dir.path())))
        << "signal " << sig << " left the socket behind\n"
        << server->Log();
  }
}

}  // namespace
}  // namespace vstack
