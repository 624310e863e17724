// LowestFailedRead: after a chunk read failed, the lowest offset in it whose read fails, found
// by reading it again in halves down to one block; what the image tools report.
#include "lib/sync_io.h"

#include <gtest/gtest.h>

#include <string>

#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "tests/testing/test_util.h"

namespace vstack {
namespace {

DevicePtr OpenOrDie(const std::string& spec) {
  auto d = Open(spec);
  EXPECT_TRUE(d) << d.error().ToString();
  return d ? std::move(*d) : nullptr;
}

// Reads [offset, offset + length) of `spec`, which must fail, and locates the failure.
FailedRead Locate(const std::string& spec, uint64_t offset, uint64_t length) {
  DevicePtr d = OpenOrDie(spec);
  SyncIo io(*d);
  AlignedBuffer buf(length, 4096);
  const std::error_code ec = io.Read(offset, buf.span());
  EXPECT_TRUE(ec) << spec;
  return io.LowestFailedRead(offset, buf.span(), ec);
}

TEST(LowestFailedRead, NamesTheFirstBlockThatFailsWithItsError) {
  // Two bad ranges: the lower one is named, by the block holding its first byte.
  const std::string two_bad =
      "error:ops=read,errno=EIO,offset=300000,length=1+error:ops=read,"
      "errno=ENOSPC,offset=700000,length=1+memory:1M";
  FailedRead f = Locate(two_bad, 0, 1 << 20);
  EXPECT_EQ(f.offset, 300000u / 512 * 512);
  EXPECT_EQ(f.error, std::errc::io_error);
  // From a chunk that starts past the first: the second, with its own error.
  f = Locate(two_bad, 512 << 10, 512 << 10);
  EXPECT_EQ(f.offset, 700000u / 512 * 512);
  EXPECT_EQ(f.error, std::errc::no_space_on_device);
  // A device of 4 KiB blocks is read no finer than 4 KiB (a smaller read would fail as
  // unaligned, and be taken for the failure).
  f = Locate("error:ops=read,offset=300000,length=1+memory:1M,block=4096", 0, 1 << 20);
  EXPECT_EQ(f.offset, 300000u / 4096 * 4096);
  EXPECT_EQ(f.error, std::errc::io_error);
  // The last block of a chunk whose length is not a power of two.
  f = Locate("error:ops=read,offset=1047552,length=512+memory:1M", 0, 1047552 + 512);
  EXPECT_EQ(f.offset, 1047552u);
}

TEST(LowestFailedRead, AnErrorThatDoesNotRepeatKeepsTheChunksOffsetAndError) {
  // Only the first matching read fails: the chunk's own read.
  const FailedRead f = Locate("error:ops=read,count=1,errno=EPERM+memory:1M", 64 << 10, 256 << 10);
  EXPECT_EQ(f.offset, 64u << 10);
  EXPECT_EQ(f.error, std::errc::operation_not_permitted);
}

}  // namespace
}  // namespace vstack
