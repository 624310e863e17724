// Images of formats vstack does not read, made by qemu-img: a bare path to one is refused with
// the format's name, not opened as raw bytes (where `vstack space` misread a qcow2's clusters as
// a guest's data and a writer destroyed the image); naming `file:` still opens the bytes; and a
// guest of a probed raw disk cannot write such a signature (lib/foreign_formats.h).
#include "lib/foreign_formats.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tools.h"

namespace vstack::testing {
namespace {

struct Made {
  const char* format;  // as vstack names it in the error
  const char* qemu;    // qemu-img create's arguments before the path
};

// Every entry of ForeignFormatSignatures() that qemu-img 7.2 can create (COWD and the qcow
// version 1 magic aside: qemu-img writes neither any more).
const Made kMade[] = {
    {"qcow2", "-f qcow2"},
    {"QED", "-f qed"},
    {"VMDK", "-f vmdk"},                              // a sparse extent, KDMV
    {"VMDK", "-f vmdk -o subformat=monolithicFlat"},  // the descriptor file
    {"VDI", "-f vdi"},
    {"Parallels", "-f parallels"},
    {"LUKS", "-f luks --object secret,id=k,data=pw -o key-secret=k,iter-time=50"},
};

class ForeignFormats : public ::testing::Test {
 protected:
  void SetUp() override { VSTACK_REQUIRE_PROGRAM("qemu-img", "qemu-utils"); }

  // LUKS times its key derivation first, and a loaded machine can fail that ("Unable to get
  // accurate CPU usage"): tries until it works (three in a row failed once in CI's ASan run).
  std::string Make(const Made& m, int i) {
    const std::string path = dir_.File("image" + std::to_string(i));
    CommandResult r;
    for (int attempt = 0; attempt < 10 && r.status != 0; ++attempt) {
      r = RunCommand(std::string("qemu-img create -q ") + m.qemu + " " + path + " 16M 2>&1");
    }
    EXPECT_EQ(r.status, 0) << m.qemu << "\n" << r.output;
    return path;
  }

  TempDir dir_;
};

TEST_F(ForeignFormats, ABarePathToOneIsRefusedNamingTheFormatAndNamingFileOpensItsBytes) {
  int i = 0;
  for (const Made& m : kMade) {
    SCOPED_TRACE(m.qemu);
    const std::string path = Make(m, i++);
    for (bool read_only : {true, false}) {
      auto dev = OpenImage(path, OpenOptions{.read_only = read_only});
      ASSERT_FALSE(dev) << "opened as " << (*dev)->kind();
      EXPECT_EQ(dev.error().code, make_error_code(Errc::kNotSupported));
      EXPECT_NE(dev.error().message.find(std::string("is a ") + m.format + " image"),
                std::string::npos)
          << dev.error().message;
      EXPECT_NE(dev.error().message.find("'file:" + path + "'"), std::string::npos)
          << dev.error().message;
    }
    auto raw = OpenImage("file:" + path, OpenOptions{.read_only = true});
    ASSERT_TRUE(raw) << raw.error().message;
    EXPECT_EQ((*raw)->kind(), "file");
  }
  // The commands say it too, as an error, and analyse nothing.
  const std::string qcow2 = dir_.File("image0");
  for (const char* command : {"space ", "info ", "check "}) {
    CommandResult r = RunVstack(command + qcow2);
    EXPECT_NE(r.status, 0) << command << r.output;
    EXPECT_NE(r.output.find("is a qcow2 image"), std::string::npos) << command << r.output;
  }
}

TEST_F(ForeignFormats, AGuestOfAProbedRawDiskCannotWriteOneOfTheirSignatures) {
  const std::string path = dir_.File("disk.raw");
  WriteFile(path, 1 << 20, 0);
  auto dev = OpenImage(path);
  ASSERT_TRUE(dev) << dev.error().message;
  ASSERT_EQ((*dev)->kind(), "raw-guard");
  SyncIo io(**dev);
  for (const ProbeSignature& s : ForeignFormatSignatures()) {
    SCOPED_TRACE(s.format + " at " + std::to_string(s.offset));
    std::vector<std::byte> sector(512);
    std::memcpy(sector.data() + s.offset, s.bytes.data(), s.bytes.size());
    EXPECT_EQ(io.Write(0, sector), make_error_code(Errc::kReadOnly));
  }
  std::vector<std::byte> other(512, std::byte{0x51});
  EXPECT_FALSE(io.Write(0, other)) << "other contents of the first sector go through";
  EXPECT_FALSE(io.Flush());
}

}  // namespace
}  // namespace vstack::testing
