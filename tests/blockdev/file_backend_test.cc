// Backend-specific behaviour of file and uring that the conformance suite cannot see: opening
// errors, locking, sizing, sparse extents.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "blockdev/uring/uring_device.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"

namespace vstack {
namespace {

using testing::TempDir;

class FileBackend : public ::testing::TestWithParam<const char*> {
 protected:
  std::string Spec(const std::string& rest) { return std::string(GetParam()) + ":" + rest; }
  TempDir dir_;
};

void ExpectError(const Result<DevicePtr>& r, const std::string& needle) {
  ASSERT_FALSE(r) << "expected an error containing '" << needle << "'";
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
}

TEST_P(FileBackend, MissingFileNamesPathAndCause) {
  auto r = Open(Spec(dir_.File("missing.img")));
  ExpectError(r, "missing.img");
  ExpectError(r, "No such file or directory");
  EXPECT_EQ(r.error().code, std::errc::no_such_file_or_directory);
  // The backend's create= is suggested only where it is what the spec means: not under an
  // image format (create=on would make an empty file, not a VHD: `compact missing.vhd`), nor
  // for a read-only open, which wants what exists (a parent: `rebase -b missing.vhd`).
  ExpectError(r, "(use create=on,size=N to create it)");
  for (bool read_only : {false, true}) {
    auto image = Open("vhd+" + Spec(dir_.File("missing.vhd")), OpenOptions{.read_only = read_only});
    ASSERT_FALSE(image);
    EXPECT_EQ(image.error().message.find("create"), std::string::npos) << image.error().message;
  }
  auto ro = Open(Spec(dir_.File("missing.img")), OpenOptions{.read_only = true});
  ASSERT_FALSE(ro);
  EXPECT_EQ(ro.error().message.find("create"), std::string::npos) << ro.error().message;
  // With create=on, what is missing is a directory of the path: named, and no hint to use the
  // create=on that the spec gives (`vstack create nodir/x.raw 1M` said to).
  for (const char* excl : {"", ",excl=on"}) {
    const std::string path = dir_.File("nodir/new.img");
    auto nodir = Open(Spec(path + ",create=on,size=1M" + excl));
    ExpectError(nodir, "cannot create '" + path + "': No such file or directory (directory '" +
                           dir_.File("nodir") + "' does not exist)");
    EXPECT_EQ(nodir.error().code, std::errc::no_such_file_or_directory);
    EXPECT_EQ(nodir.error().message.find("use create=on"), std::string::npos)
        << nodir.error().message;
  }
}

TEST_P(FileBackend, DirectoryAndFifoAreRejected) {
  ExpectError(Open(Spec(dir_.path())), dir_.path());
  // Without opening it: the open of a FIFO blocks until a writer comes (this test hung).
  const std::string fifo = dir_.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectError(Open(Spec(fifo)), "not a regular file or block device");
  ExpectError(Open(Spec(fifo), OpenOptions{.read_only = true}), "not a regular file or block device");
}

TEST_P(FileBackend, CreateNeedsSizeAndBadOptionsCreateNothing) {
  ExpectError(Open(Spec(dir_.File("a.img") + ",create=on")), "is empty; give size=");
  EXPECT_FALSE(std::filesystem::exists(dir_.File("a.img"))) << "a failed open left its file";
  const std::string b = dir_.File("b.img");
  ExpectError(Open(Spec(b + ",create=on,size=12Q")), "invalid size '12Q'");
  EXPECT_FALSE(std::filesystem::exists(b)) << "a rejected spec must not create files";
  ExpectError(Open(Spec(b + ",create=on,size=1M,direct=maybe")), "expected on or off");
  EXPECT_FALSE(std::filesystem::exists(b));
  ExpectError(Open(Spec(dir_.File("c.img") + ",create=on,size=1M"), OpenOptions{.read_only = true}),
              "create=on needs a writable open");
}

TEST_P(FileBackend, UnwritablePathsNameTheCause) {
  // A path below a regular file cannot exist.
  const std::string f = dir_.File("plain");
  testing::WriteFile(f, 4096, 0);
  auto r = Open(Spec(f + "/x.img,create=on,size=1M"));
  ExpectError(r, "Not a directory");
  // An immutable file refuses writers even for root (where the filesystem supports it).
  if (testing::RunCommand("chattr +i " + f).status != 0) GTEST_SKIP() << "no chattr +i here";
  ExpectError(Open(Spec(f)), "Operation not permitted");
  EXPECT_OK(Open(Spec(f), OpenOptions{.read_only = true}));
  testing::RunCommand("chattr -i " + f);
}

TEST_P(FileBackend, ExtendsButNeverShrinks) {
  const std::string p = dir_.File("x.img");
  {
    auto d = Open(Spec(p + ",create=on,size=1M"));
    ASSERT_OK(d);
    EXPECT_EQ((*d)->geometry().size_bytes, 1u << 20);
  }
  {
    auto d = Open(Spec(p + ",size=2M"));
    ASSERT_OK(d);
    EXPECT_EQ((*d)->geometry().size_bytes, 2u << 20);
    // The file takes the size with the first write (anywhere), not at the open.
    SyncIo io(**d);
    std::vector<std::byte> buf(4096, std::byte{0x5A});
    ASSERT_OK(io.Read((2 << 20) - 4096, buf));
    EXPECT_EQ(buf[0], std::byte{0}) << "past the file's end: zeros";
    EXPECT_EQ(std::filesystem::file_size(p), 1u << 20);
    buf.assign(4096, std::byte{0x5A});
    ASSERT_OK(io.Write(0, buf));
    EXPECT_EQ(std::filesystem::file_size(p), 2u << 20);
  }
  ExpectError(Open(Spec(p + ",create=on,size=1M")), "refusing to shrink");
  EXPECT_EQ(std::filesystem::file_size(p), 2u << 20);
}

// size= on an image whose stack then refuses it changes nothing: the file of a fixed VHD was
// extended at the open, so its footer no longer ended it and the image was lost (read as raw).
TEST_P(FileBackend, SizeOnAnImageTheStackRefusesLeavesTheFileAsItWas) {
  const std::string p = dir_.File("f.vhd");
  ASSERT_OK(CreateImage("vhd", p, 1 << 20, "subformat=fixed"));
  const uint64_t size = std::filesystem::file_size(p);
  ExpectError(Open("vhd+" + Spec(p + ",size=64M")), "no footer");
  EXPECT_EQ(std::filesystem::file_size(p), size);
  auto d = OpenImage(p, OpenOptions{.read_only = true});
  ASSERT_OK(d);
  EXPECT_EQ((*d)->kind(), "vhd");
}

TEST_P(FileBackend, OddSizedFileRoundsUpAndReadsZerosPastEnd) {
  const std::string p = dir_.File("odd.img");
  testing::WriteFile(p, 1000, 0xAA);
  auto d = Open(Spec(p));
  ASSERT_OK(d);
  EXPECT_EQ((*d)->geometry().size_bytes, 1024u);
  SyncIo io(**d);
  std::vector<std::byte> buf(1024);
  ASSERT_OK(io.Read(0, buf));
  EXPECT_EQ(buf[999], std::byte{0xAA});
  EXPECT_EQ(buf[1000], std::byte{0});
  EXPECT_EQ(buf[1023], std::byte{0});
}

// The open in the way is this process's own (OFD locks conflict within a process too): the
// message says so, where it used to send the user looking for another process.
TEST_P(FileBackend, SecondWriterIsLockedOutUnlessLockOff) {
  const std::string p = dir_.File("l.img");
  auto first = Open(Spec(p + ",create=on,size=1M"));
  ASSERT_OK(first);
  ExpectError(Open(Spec(p)), "in use by this process: another open of it, not closed yet");
  ExpectError(Open(Spec(p), OpenOptions{.read_only = true}), "in use by this process");
  EXPECT_OK(Open(Spec(p + ",lock=off")));
  // Once the first is closed (or destroyed), the file is free, and not counted as held here.
  ASSERT_OK((*first)->Close());
  auto second = Open(Spec(p));
  ASSERT_OK(second);
  second->reset();
  EXPECT_OK(Open(Spec(p)));
}

TEST_P(FileBackend, ReadOnlyRejectsWrites) {
  const std::string p = dir_.File("r.img");
  testing::WriteFile(p, 1 << 20, 0);
  auto d = Open(Spec(p), OpenOptions{.read_only = true});
  ASSERT_OK(d);
  EXPECT_TRUE((*d)->read_only());
  SyncIo io(**d);
  std::vector<std::byte> buf(4096);
  EXPECT_EQ(io.Write(0, buf), make_error_code(Errc::kReadOnly));
  EXPECT_OK(io.Read(0, buf));
}

TEST_P(FileBackend, ExtentsShowHolesOfASparseFile) {
  const std::string p = dir_.File("s.img");
  auto d = Open(Spec(p + ",create=on,size=8M"));
  ASSERT_OK(d);
  SyncIo io(**d);
  std::vector<std::byte> data(1 << 20, std::byte{1});
  ASSERT_OK(io.Write(4 << 20, data));
  ASSERT_OK(io.Flush());
  std::vector<Extent> ext;
  ASSERT_OK((*d)->MapExtents(0, 8 << 20, &ext));
  ASSERT_EQ(ext.size(), 3u);
  EXPECT_EQ(ext[0], (Extent{0, 4 << 20, kExtentHole | kExtentZero}));
  EXPECT_EQ(ext[1], (Extent{4 << 20, 1 << 20, 0}));
  EXPECT_EQ(ext[2], (Extent{5 << 20, 3 << 20, kExtentHole | kExtentZero}));
  // Discard punches the hole back.
  ASSERT_OK(io.Discard(4 << 20, 1 << 20));
  ext.clear();
  ASSERT_OK((*d)->MapExtents(0, 8 << 20, &ext));
  EXPECT_EQ(ext.size(), 1u);
}

// Write-zeroes that may unmap leave a hole, as qemu's do; without the flag the range stays
// allocated (a layer's reserved metadata). crc32c's format zeroes its data area so: over a
// sparse 1 GiB file on ext4 it allocated the whole GiB (FALLOC_FL_ZERO_RANGE), now 2 MB.
TEST_P(FileBackend, WriteZeroesThatMayUnmapLeaveAHole) {
  const std::string p = dir_.File("z.img");
  auto d = Open(Spec(p + ",create=on,size=8M"));
  ASSERT_OK(d);
  SyncIo io(**d);
  std::vector<std::byte> data(8 << 20, std::byte{1});
  ASSERT_OK(io.Write(0, data));
  ASSERT_OK(io.WriteZeroes(0, 4 << 20, kIoMayUnmap));
  ASSERT_OK(io.WriteZeroes(4 << 20, 4 << 20));
  ASSERT_OK(io.Flush());
  std::vector<std::byte> back(8 << 20);
  ASSERT_OK(io.Read(0, back));
  EXPECT_EQ(back, std::vector<std::byte>(8 << 20, std::byte{0}));
  std::vector<Extent> ext;
  ASSERT_OK((*d)->MapExtents(0, 8 << 20, &ext));
  ASSERT_FALSE(ext.empty());
  EXPECT_EQ(ext[0], (Extent{0, 4 << 20, kExtentHole | kExtentZero}));
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_GE(uint64_t(st.st_blocks) * 512, uint64_t{4} << 20) << "the range without the flag stays";
  EXPECT_LT(uint64_t(st.st_blocks) * 512, uint64_t{8} << 20) << "the range with it is a hole";
}

// Mapping a long run of data piece by piece costs one pair of seeks for the run, not a pair per
// piece: each SEEK_HOLE walks from where it starts to the next hole (on tmpfs a scan of the page
// cache), so `vstack convert` of a 4 GiB raw file on tmpfs took 62 s, its map quadratic in the
// file (3.6 s now). A punched hole makes the remembered run go: the next map sees the hole.
TEST_P(FileBackend, MappingDataPieceByPieceSeeksOncePerRun) {
  constexpr uint64_t kSize = 16 << 20, kPiece = 64 << 10;
  auto d = Open(Spec(dir_.File("m.img") + ",create=on,size=16M"));
  ASSERT_OK(d);
  SyncIo io(**d);
  ASSERT_OK(io.Write(0, std::vector<std::byte>(kSize, std::byte{1})));
  ASSERT_OK(io.Flush());
  auto seeks = [&] { return (*d)->Stats().counter("map_seeks"); };
  auto map = [&](uint64_t at) {
    std::vector<Extent> ext;
    EXPECT_OK((*d)->MapExtents(at, kPiece, &ext));
    return ext;
  };
  const uint64_t before = seeks();
  for (uint64_t at = 0; at < kSize; at += kPiece) {
    ASSERT_EQ(map(at), (std::vector<Extent>{{at, kPiece, 0}})) << "at " << at;
  }
  EXPECT_EQ(seeks() - before, 2u) << "one SEEK_DATA and one SEEK_HOLE for the whole run";

  ASSERT_OK(io.Discard(8 << 20, 1 << 20));
  EXPECT_EQ(map(8 << 20), (std::vector<Extent>{{8 << 20, kPiece, kExtentHole | kExtentZero}}));
  EXPECT_EQ(map(2 << 20), (std::vector<Extent>{{2 << 20, kPiece, 0}}));
  ASSERT_OK(io.WriteZeroes(2 << 20, 1 << 20, kIoMayUnmap));
  EXPECT_EQ(map(2 << 20), (std::vector<Extent>{{2 << 20, kPiece, kExtentHole | kExtentZero}}));
}

TEST_P(FileBackend, DirectNeedsAlignedBuffers) {
  auto d = Open(Spec(dir_.File("d.img") + ",create=on,size=1M,direct=on"));
  ASSERT_OK(d);
  EXPECT_GE((*d)->geometry().mem_alignment, 512u);
  SyncIo io(**d);
  AlignedBuffer buf(8192);
  EXPECT_EQ(io.Write(0, buf.span().subspan(1, 4096)), make_error_code(Errc::kBadBufferAlignment));
  EXPECT_OK(io.Write(0, buf.span().subspan(0, 4096)));
}

INSTANTIATE_TEST_SUITE_P(Backends, FileBackend, ::testing::Values("file", "uring"));

TEST(UringBackend, IsAvailableHere) { EXPECT_OK(UringDevice::CheckAvailable()); }

TEST(OpenSpec, ErrorsListTheValidChoices) {
  ExpectError(Open("nosuch+memory:1M"), "unknown layer 'nosuch'; backends: file, memory, null, rados, rbd, sim, uring");
  ExpectError(Open("memory:1M,colour=red"), "unknown option 'colour' for 'memory'; valid options: block");
  // A near miss is named: a layer, a backend, an option (`stats` included).
  ExpectError(Open("dedupx+memory:1M"), "; did you mean `dedup`?");
  ExpectError(Open("memroy:1M"), "unknown backend 'memroy'; backends: file, memory, null, rados, "
                                 "rbd, sim, uring; layers: ");
  ExpectError(Open("memroy:1M"), "; did you mean `memory`?");
  ExpectError(Open("zstd:levle=3+memory:1M"), "; did you mean `level`?");
  ExpectError(Open("memory:1M,stat=counts"), "; did you mean `stats`?");
  ExpectError(Open("frobnicate+memory:1M"), "layers: crc32c");  // far from all: no suggestion
  EXPECT_EQ(Open("frobnicate+memory:1M").error().message.find("did you mean"), std::string::npos);
  ExpectError(Open("passthrough"), "'passthrough' is a layer, but a spec must end with a backend");
  ExpectError(Open("memory:1M+memory:1M"), "'memory' is a backend and must come last");
  ExpectError(Open("memory"), "backend 'memory' needs a SIZE");
  ExpectError(Open("passthrough:/x+memory:1M"), "takes only key=value options");
  ExpectError(Open("memory:1000"), "must be a positive multiple of 512");
  ExpectError(Open("memory:1M,block=1024"), "'1024' is not one of: 512, 4096");
  ExpectError(Open("uring:/x,entries=5"), "outside 8..4096");
}

TEST(OpenImage, PathsAreProbedAndSpecsPassThrough) {
  TempDir dir;
  const std::string p = dir.File("raw.img");
  testing::WriteFile(p, 1 << 20, 0);
  std::string chosen;
  auto d = OpenImage(p, {}, &chosen);
  ASSERT_OK(d);
  EXPECT_EQ(chosen, "file:" + p);
  auto m = OpenImage("memory:1M", {}, &chosen);
  ASSERT_OK(m);
  EXPECT_EQ(chosen, "memory:1M");
  ExpectError(OpenImage(dir.File("none.img")), "No such file or directory");
}

}  // namespace
}  // namespace vstack

namespace vstack {
namespace {

TEST(OpenImage, MalformedSpecsReportTheParseErrorNotAMissingFile) {
  for (const char* spec : {"memory:1M++", "memory:1M,block=512,block=512", "zstd+memory:1M+"}) {
    auto r = OpenImage(spec, {});
    ASSERT_FALSE(r) << spec;
    EXPECT_EQ(r.error().message.find("No such file"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(spec), std::string::npos) << r.error().message;
  }
  ExpectError(OpenImage("memory:1M++", {}), "empty part");
  ExpectError(OpenImage("memory:1M,block=512,block=512", {}), "option 'block' given twice");
  // A path that names no component is still a missing file, and so is a lone word (it was
  // reported as "unknown backend", a usage error, and a file named "x.img" as an invalid name).
  ExpectError(OpenImage("/nonexistent/x.img", {}), "No such file or directory");
  ExpectError(OpenImage("nonexistent", {}), "cannot open 'nonexistent': No such file or directory");
  ExpectError(OpenImage("nonexistent.img", {}), "No such file or directory");
}

TEST(CreateImage, RawIsSparseAndNeverOverwrites) {
  testing::TempDir dir;
  const std::string p = dir.File("new.raw");
  ASSERT_OK(CreateImage("raw", p, 1 << 30));
  EXPECT_EQ(std::filesystem::file_size(p), 1u << 30);
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_LT(st.st_blocks * 512, 1 << 20) << "raw images are created sparse";
  auto again = CreateImage("raw", p, 1 << 20);
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("File exists"), std::string::npos) << again.error().message;
  EXPECT_EQ(std::filesystem::file_size(p), 1u << 30);
  auto bad = CreateImage("nosuch", dir.File("x"), 1 << 20);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("unknown image format 'nosuch'"), std::string::npos);
  EXPECT_FALSE(CreateImage("raw", dir.File("y"), 1 << 20, "preallocation=full"));
}

}  // namespace
}  // namespace vstack
