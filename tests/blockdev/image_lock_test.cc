// vstack's image locks against qemu's (blockdev/file/image_lock.h), with qemu-io and qemu-img
// as the other party: each refuses what the other holds, in both directions, and readers
// share. Before these locks vstack took flock, which qemu does not see: a qemu-io write made
// while `vstack compact` rewrote the same image was acknowledged and lost.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "lib/registry.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tools.h"

namespace vstack::testing {
namespace {

// True while some process holds an OFD lock on byte `offset` of `path`, as the kernel lists
// it in /proc/locks ("1: OFDLCK ADVISORY READ -1 fe:00:INODE START END"): independent of the
// code under test.
bool ByteLocked(const std::string& path, off_t offset) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream in(line);
    std::string id, kind, mode, type, pid, where, first, last;
    if (!(in >> id >> kind >> mode >> type >> pid >> where >> first >> last)) continue;
    if (kind != "OFDLCK" || where.substr(where.rfind(':') + 1) != std::to_string(st.st_ino)) continue;
    if (std::stoll(first) <= offset && (last == "EOF" || offset <= std::stoll(last))) return true;
  }
  return false;
}

// An interactive qemu-io holding `path` open (read-only or writable) until destroyed.
class QemuIoHolding {
 public:
  QemuIoHolding(const std::string& path, bool writable) {
    pipe_ = ::popen(("exec qemu-io " + std::string(writable ? "" : "-r ") + "-f vpc " + path +
                     " >/dev/null 2>&1").c_str(), "w");
    // Wait until it holds its "read" lock (byte 100): qemu-io has opened the image.
    for (int i = 0; i < 3000 && pipe_ != nullptr && !ByteLocked(path, 100); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~QemuIoHolding() {
    if (pipe_ == nullptr) return;
    std::fputs("quit\n", pipe_);
    ::pclose(pipe_);
  }
  bool started() const { return pipe_ != nullptr; }

 private:
  FILE* pipe_ = nullptr;
};

class ImageLock : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {"qemu-img", "qemu-io"}) VSTACK_REQUIRE_PROGRAM(tool, "qemu-utils");
    image_ = dir_.File("disk.vhd");
    CommandResult c = RunCommand("qemu-img create -q -f vpc -o subformat=dynamic " + image_ + " 16M");
    ASSERT_EQ(c.status, 0) << c.output;
  }
  TempDir dir_;
  std::string image_;
};

TEST_F(ImageLock, VstackRefusesAnImageQemuIsWriting) {
  QemuIoHolding qemu(image_, /*writable=*/true);
  ASSERT_TRUE(qemu.started());
  ASSERT_TRUE(ByteLocked(image_, 101)) << "qemu-io holds no \"write\" lock";
  for (const std::string& args : {"compact " + image_, "info " + image_, "check " + image_}) {
    CommandResult c = RunVstack(args);
    EXPECT_NE(c.status, 0) << args;
    EXPECT_NE(c.output.find("in use by another process"), std::string::npos) << args << "\n" << c.output;
  }
  auto writable = Open("vhd+file:" + image_);
  ASSERT_FALSE(writable);
  EXPECT_EQ(writable.error().code, std::errc::operation_would_block) << writable.error().message;
  // lock=off opens anyway, as qemu's force-share (-U) does.
  EXPECT_OK(Open("vhd+file:" + image_ + ",lock=off", OpenOptions{.read_only = true}));
}

// qemu-img reads an image a guest is writing with -U (force-share); vstack's read-only
// commands did not take -U ("unknown option '-U'; did you mean `-h`?"), and the refusal said
// "pass lock=off", which a path cannot take. They take -U now, parents of a chain included, and
// the refusal of a read-only open names it; a repair with -U is refused (it writes).
TEST_F(ImageLock, ReadOnlyCommandsTakeForceShareAsQemuImgDoes) {
  const std::string other = dir_.File("other.vhd"), child = dir_.File("child.vhd");
  ASSERT_EQ(RunCommand("qemu-img create -q -f vpc -o subformat=dynamic " + other + " 16M").status,
            0);
  ASSERT_EQ(RunVstack("create -f vhd -b disk.vhd " + child).status, 0);
  QemuIoHolding qemu(image_, /*writable=*/true);
  ASSERT_TRUE(qemu.started());
  ASSERT_TRUE(ByteLocked(image_, 101)) << "qemu-io holds no \"write\" lock";
  CommandResult q = RunCommand("qemu-img info -U -f vpc " + image_);
  EXPECT_EQ(q.status, 0) << q.output;
  CommandResult refused = RunVstack("info " + image_);
  EXPECT_EQ(refused.status, 1) << refused.output;
  EXPECT_NE(refused.output.find("to read it anyway, pass -U"), std::string::npos) << refused.output;
  for (const std::string& args :
       {"info -U " + image_, "info -U --backing-chain " + child, "map -U " + image_,
        "map -U " + child, "check -U " + image_, "compare -U " + image_ + " " + other,
        "convert -U -O raw " + image_ + " " + dir_.File("copy.raw")}) {
    CommandResult c = RunVstack(args);
    EXPECT_EQ(c.status, 0) << args << "\n" << c.output;
  }
  CommandResult repair = RunVstack("check -U -r all " + image_);
  EXPECT_EQ(repair.status, 1) << repair.output;
  EXPECT_NE(repair.output.find("force-share (-U) is for read-only opens only"), std::string::npos)
      << repair.output;
}

TEST_F(ImageLock, QemuRefusesAnImageVstackHasOpen) {
  {
    auto dev = Open("vhd+file:" + image_);
    ASSERT_OK(dev);
    CommandResult info = RunCommand("qemu-img info -f vpc " + image_);
    EXPECT_NE(info.status, 0) << info.output;
    EXPECT_NE(info.output.find("Failed to get shared \"write\" lock"), std::string::npos) << info.output;
    CommandResult write = RunCommand("qemu-io -f vpc -c 'write 0 4k' " + image_);
    EXPECT_NE(write.status, 0) << write.output;
    EXPECT_NE(write.output.find("lock"), std::string::npos) << write.output;
  }
  {
    // A reader lets readers in and keeps writers out.
    auto dev = Open("vhd+file:" + image_, OpenOptions{.read_only = true});
    ASSERT_OK(dev);
    CommandResult info = RunCommand("qemu-img info -f vpc " + image_);
    EXPECT_EQ(info.status, 0) << info.output;
    CommandResult write = RunCommand("qemu-io -f vpc -c 'write 0 4k' " + image_);
    EXPECT_NE(write.status, 0) << write.output;
    EXPECT_NE(write.output.find("Failed to get \"write\" lock"), std::string::npos) << write.output;
  }
  // Closed: qemu writes again.
  CommandResult write = RunCommand("qemu-io -f vpc -c 'write 0 4k' " + image_);
  EXPECT_EQ(write.status, 0) << write.output;
}

TEST_F(ImageLock, ReadersOfBothShare) {
  QemuIoHolding qemu(image_, /*writable=*/false);
  ASSERT_TRUE(qemu.started());
  ASSERT_TRUE(ByteLocked(image_, 100));
  EXPECT_OK(Open("vhd+file:" + image_, OpenOptions{.read_only = true}));
  CommandResult info = RunVstack("info " + image_);
  EXPECT_EQ(info.status, 0) << info.output;
  // A writer is refused: qemu's reader does not share "write".
  CommandResult compact = RunVstack("compact " + image_);
  EXPECT_NE(compact.status, 0) << compact.output;
  EXPECT_NE(compact.output.find("does not let others write it"), std::string::npos) << compact.output;
}

}  // namespace
}  // namespace vstack::testing
