// qemu-img's habits in vstack's image commands: -f names a source format, vpc is vhd, compare -s
// is strict about sizes, and an existing destination is refused with the way to proceed
// (--overwrite), which replaces it only once the new image is complete.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/testing/test_util.h"

namespace vstack {
namespace {

using testing::CommandResult;
using testing::RunVstack;
using testing::TempDir;

bool Has(const CommandResult& r, const std::string& text) {
  return r.output.find(text) != std::string::npos;
}

TEST(QemuHabits, VpcIsVhdForCreateAndConvert) {
  TempDir dir;
  const std::string vpc = dir.File("a.vhd");
  CommandResult c = RunVstack("create -f vpc " + vpc + " 4M");
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_TRUE(Has(c, "format vhd")) << c.output;
  EXPECT_TRUE(Has(RunVstack("info " + vpc), "[0] vhd"));
  const std::string out = dir.File("b.vhd");
  CommandResult v = RunVstack("convert -O vpc " + vpc + " " + out);
  ASSERT_EQ(v.status, 0) << v.output;
  EXPECT_TRUE(Has(RunVstack("info " + out), "[0] vhd"));
}

// A raw size that is not whole sectors becomes whole sectors, as qemu-img create -f raw makes
// it: the file was 1,000 bytes while create (and info) said 1,024.
TEST(QemuHabits, CreateRawRoundsUpToWholeSectors) {
  TempDir dir;
  const std::string raw = dir.File("x.raw");
  CommandResult c = RunVstack("create " + raw + " 1000");
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_TRUE(Has(c, "virtual size 1 KiB (1024 bytes), 1000 requested")) << c.output;
  EXPECT_EQ(std::filesystem::file_size(raw), 1024u) << "as qemu-img create -f raw x.raw 1000";
}

TEST(QemuHabits, ConvertDashFNamesTheSourceFormat) {
  TempDir dir;
  const std::string vhd = dir.File("a.vhd");
  ASSERT_EQ(RunVstack("create -f vhd " + vhd + " 4M").status, 0);
  // -f raw copies the VHD file itself (footer and all), not its virtual disk.
  CommandResult raw = RunVstack("convert -f raw " + vhd + " " + dir.File("file.raw"));
  ASSERT_EQ(raw.status, 0) << raw.output;
  EXPECT_EQ(std::filesystem::file_size(dir.File("file.raw")), std::filesystem::file_size(vhd));
  CommandResult as_vhd = RunVstack("convert -f vpc " + vhd + " " + dir.File("disk.raw"));
  ASSERT_EQ(as_vhd.status, 0) << as_vhd.output;
  EXPECT_GE(std::filesystem::file_size(dir.File("disk.raw")), 4u << 20);  // CHS-rounded up
  // A raw file is not a VHD: -f vhd must not pass it off as one.
  testing::WriteFile(dir.File("plain.raw"), 1 << 20, 0);
  CommandResult wrong = RunVstack("convert -f vhd " + dir.File("plain.raw") + " " + dir.File("x"));
  EXPECT_EQ(wrong.status, 1) << wrong.output;
  CommandResult unknown = RunVstack("convert -f qcow2 " + vhd + " " + dir.File("y"));
  EXPECT_EQ(unknown.status, 2) << unknown.output;
  EXPECT_TRUE(Has(unknown, "'qcow2' is not one of raw|vhd|vhdx|vpc")) << unknown.output;
  CommandResult spec = RunVstack("convert -f raw memory:1M " + dir.File("z"));
  EXPECT_EQ(spec.status, 2) << spec.output;
}

TEST(QemuHabits, CompareStrictRefusesDifferentSizes) {
  TempDir dir;
  testing::WriteFile(dir.File("a.raw"), 1 << 20, 0);
  testing::WriteFile(dir.File("b.raw"), 2 << 20, 0);
  const std::string ab = dir.File("a.raw") + " " + dir.File("b.raw");
  CommandResult loose = RunVstack("compare " + ab);
  EXPECT_EQ(loose.status, 0) << loose.output;
  EXPECT_TRUE(Has(loose, "Warning: Image size mismatch!")) << loose.output;
  CommandResult strict = RunVstack("compare -s " + ab);
  EXPECT_EQ(strict.status, 1) << strict.output;
  EXPECT_TRUE(Has(strict, "Strict mode: Image size mismatch!")) << strict.output;
  EXPECT_EQ(RunVstack("compare -s " + dir.File("a.raw") + " " + dir.File("a.raw")).status, 0);
  EXPECT_EQ(RunVstack("compare -f raw -F raw " + ab).status, 0);
  // A VHD seen as a VHD (zeros) and as raw (its own metadata, shorter than its virtual disk):
  // the common part differs, not only the extra part.
  ASSERT_EQ(RunVstack("create -f vpc " + dir.File("a.vhd") + " 4M").status, 0);
  CommandResult views =
      RunVstack("compare -f vpc -F raw " + dir.File("a.vhd") + " " + dir.File("a.vhd"));
  EXPECT_EQ(views.status, 1) << views.output;
  EXPECT_TRUE(Has(views, "Content mismatch at offset 0!")) << views.output;
}

// Ctrl-C during convert (here GNU timeout's SIGINT, sent twice: to the process, then to its
// group) stops the copy and removes the new file, with exit 130 (it left a partial image under
// the destination's name, which a second try then refused as existing).
TEST(QemuHabits, AnInterruptedConvertRemovesTheNewFile) {
  TempDir dir;
  const std::string src = dir.File("src.raw"), out = dir.File("out.vhd");
  testing::WriteFile(src, 32 << 20, 0x5A);
  // Each 2 MiB read takes 400 ms: 16 of them, 8 in flight, last at least 800 ms.
  CommandResult r = testing::RunCommand(
      "timeout --preserve-status -s INT 0.4 " + std::string(VSTACK_CLI) +
      " convert -O vhd 'delay:latency=400ms+file:" + src + "' " + out);
  EXPECT_EQ(r.status, 130) << r.output;
  EXPECT_TRUE(Has(r, "interrupted at offset")) << r.output;
  EXPECT_TRUE(Has(r, "the new file was removed")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out)) << "a partial image was left at " << out;
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1)
      << "a temporary file was left beside it";
}

// --overwrite writes the new image beside the old file and renames it into place. In a
// directory the user cannot write, holding a file the user can (qemu-img writes such a file in
// place), the refusal named a file the user never asked for: "file: cannot create
// 'dst.raw.vstack-new-1234': Permission denied". It says what is not replaced, why, and that
// the old file is left as it was (it is). As root, run as user nobody.
TEST(QemuHabits, OverwriteInADirectoryThatCannotBeWrittenSaysWhy) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string src = dir.File("src.raw"), locked = dir.File("locked"),
                    dst = locked + "/dst.raw";
  testing::WriteFile(src, 1 << 20, 7);
  ASSERT_TRUE(std::filesystem::create_directory(locked));
  std::ofstream(dst) << "keep me";
  std::string as_user;
  if (::geteuid() == 0) {
    ASSERT_TRUE(testing::HaveProgram("setpriv"));  // util-linux
    as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    ASSERT_EQ(::chmod(src.c_str(), 0644), 0);
    ASSERT_EQ(::chown(dst.c_str(), 65534, 65534), 0);  // nobody's file in root's directory
  } else {
    ASSERT_EQ(::chmod(locked.c_str(), 0555), 0);
  }
  for (const std::string& args :
       {"convert --overwrite " + src + " " + dst, "create --overwrite " + dst + " 1M"}) {
    CommandResult r = testing::RunCommand(as_user + VSTACK_CLI + " " + args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    EXPECT_TRUE(Has(r, "'" + dst + "' is not replaced")) << r.output;
    EXPECT_TRUE(Has(r, "its directory '" + locked + "' does not let this user create a file"))
        << r.output;
    EXPECT_TRUE(Has(r, "it is left as it was")) << r.output;
    EXPECT_FALSE(Has(r, "vstack-new")) << r.output;
    EXPECT_EQ(std::filesystem::file_size(dst), 7u);
  }
  ::chmod(locked.c_str(), 0755);
}

TEST(QemuHabits, AnExistingDestinationNeedsOverwrite) {
  TempDir dir;
  const std::string src = dir.File("src.raw"), dst = dir.File("dst.raw");
  testing::WriteFile(src, 1 << 20, 7);
  std::ofstream(dst) << "keep me";
  CommandResult refused = RunVstack("convert " + src + " " + dst);
  EXPECT_EQ(refused.status, 1) << refused.output;
  EXPECT_TRUE(Has(refused, "vstack convert: '" + dst + "' exists; add --overwrite to replace it"))
      << refused.output;
  EXPECT_EQ(std::filesystem::file_size(dst), 7u);
  // A failure on the way (an unknown -o option) leaves the existing file as it was.
  CommandResult bad = RunVstack("convert --overwrite -O vhd -o colour=red " + src + " " + dst);
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_EQ(std::filesystem::file_size(dst), 7u);
  CommandResult ok = RunVstack("convert --overwrite " + src + " " + dst);
  ASSERT_EQ(ok.status, 0) << ok.output;
  EXPECT_EQ(RunVstack("compare -s " + src + " " + dst).status, 0);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            2)
      << "a temporary file was left behind";
  CommandResult same = RunVstack("convert --overwrite " + src + " " + src);
  EXPECT_EQ(same.status, 1) << same.output;
  EXPECT_TRUE(Has(same, "the same file")) << same.output;
  // The source named by a spec is the same file too: it was refused as "in use by another
  // process" (this process's own read of the source held its lock), which sent the user
  // looking for another program.
  for (const std::string& spec : {"file:" + src, "passthrough+file:" + src}) {
    CommandResult own = RunVstack("convert --overwrite -O raw '" + spec + "' " + src);
    EXPECT_EQ(own.status, 1) << own.output;
    EXPECT_TRUE(Has(own, "the same file")) << own.output;
    EXPECT_FALSE(Has(own, "another process")) << own.output;
    EXPECT_FALSE(Has(own, "Try `vstack help")) << own.output;
  }

  CommandResult create = RunVstack("create -f vhd " + dst + " 2M");
  EXPECT_EQ(create.status, 1) << create.output;
  EXPECT_TRUE(Has(create, "add --overwrite")) << create.output;
  CommandResult recreate = RunVstack("create -f vhd --overwrite " + dst + " 2M");
  ASSERT_EQ(recreate.status, 0) << recreate.output;
  EXPECT_TRUE(Has(RunVstack("info " + dst), "[0] vhd"));
  // A directory is never replaced, so nothing suggests --overwrite for it (it did, and then
  // said that --overwrite replaces only files).
  for (const std::string& args :
       {"create " + dir.path() + " 1M", "create --overwrite " + dir.path() + " 1M",
        "convert " + src + " " + dir.path()}) {
    CommandResult dir_dst = RunVstack(args);
    EXPECT_EQ(dir_dst.status, 1) << args << dir_dst.output;
    EXPECT_TRUE(Has(dir_dst, "is a directory; name the new image's file")) << dir_dst.output;
    EXPECT_FALSE(Has(dir_dst, "--overwrite")) << dir_dst.output;
  }
  testing::CommandResult fifo = testing::RunCommand("mkfifo " + dir.File("pipe"));
  ASSERT_EQ(fifo.status, 0) << fifo.output;
  CommandResult pipe_dst = RunVstack("convert --overwrite " + src + " " + dir.File("pipe"));
  EXPECT_EQ(pipe_dst.status, 1) << pipe_dst.output;
  EXPECT_TRUE(Has(pipe_dst, "not a regular file")) << pipe_dst.output;
}

}  // namespace
}  // namespace vstack
