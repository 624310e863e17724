// The grain layers' format versions (issue 26, item 6): dedup and zstd write version 2 (the
// reference counts are derived from the map at open, no longer stored). An image of version 1
// opens read-only as it is and is migrated (its superblock rewritten as version 2) on its first
// writable open; an image of a version newer than this vstack's is refused with a clear error and
// left untouched. Never a silent misread.
#include <gtest/gtest.h>

#include <cstring>

#include "blockdev/metastore/superblock.h"
#include "lib/endian.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

struct Layer {
  const char* name;
  const char* magic;
};

class FormatVersion : public ::testing::TestWithParam<Layer> {
 protected:
  std::string Spec() const { return std::string(GetParam().name) + "+file:" + path_; }

  // The version in the image's superblock.
  uint32_t StoredVersion() {
    auto file = Open("file:" + path_);
    EXPECT_OK(file);
    SyncIo io(**file);
    auto sb = ReadSuperblock(io, GetParam().magic, "test");
    EXPECT_OK(sb);
    return sb ? LoadLE32(sb->payload.data()) : 0;
  }

  // Rewrites the superblock as its next generation saying format version `version`.
  void SetStoredVersion(uint32_t version) {
    auto file = Open("file:" + path_);
    ASSERT_OK(file);
    SyncIo io(**file);
    auto sb = ReadSuperblock(io, GetParam().magic, "test");
    ASSERT_OK(sb);
    StoreLE32(sb->payload.data(), version);
    ++sb->generation;
    ASSERT_OK(WriteSuperblock(io, *sb, "test"));
  }

  // Writes 64 grains of patterns (some repeated, some zero) and returns them.
  std::vector<unsigned char> Populate() {
    std::vector<unsigned char> data(64 * 4096);
    for (size_t i = 0; i < data.size(); ++i) {
      const size_t g = i / 4096;
      data[i] = g % 9 == 8 ? 0 : static_cast<unsigned char>((g % 12) * 31 + i % 7);
    }
    auto dev = Open(Spec() + ",create=on,size=32M");
    EXPECT_OK(dev);
    SyncIo io(**dev);
    AlignedBuffer b(data.size());
    std::memcpy(b.data(), data.data(), data.size());
    EXPECT_OK(io.Write(1 << 20, b.span()));
    EXPECT_OK(io.Flush());
    return data;
  }

  void ExpectContent(BlockDevice& dev, const std::vector<unsigned char>& data) {
    SyncIo io(dev);
    AlignedBuffer b(data.size());
    ASSERT_OK(io.Read(1 << 20, b.span()));
    EXPECT_EQ(std::memcmp(b.data(), data.data(), data.size()), 0);
  }

  TempDir dir_;
  std::string path_ = dir_.File("v.img");
};

TEST_P(FormatVersion, NewImagesAreVersion2) {
  Populate();
  EXPECT_EQ(StoredVersion(), 2u);
}

TEST_P(FormatVersion, Version1OpensReadOnlyAsItIsAndMigratesOnItsFirstWritableOpen) {
  const auto data = Populate();
  SetStoredVersion(1);
  {
    auto dev = Open(Spec(), OpenOptions{.read_only = true});
    ASSERT_OK(dev);
    ExpectContent(**dev, data);
  }
  EXPECT_EQ(StoredVersion(), 1u) << "a read-only open changes nothing";
  {
    auto dev = Open(Spec());
    ASSERT_OK(dev);
    ExpectContent(**dev, data);
    const CheckResult c = CheckStack(**dev);
    EXPECT_EQ(c.corruptions + c.leaks, 0u) << (c.messages.empty() ? "" : c.messages[0]);
  }
  EXPECT_EQ(StoredVersion(), 2u) << "the writable open migrated the image";
  auto dev = Open(Spec());
  ASSERT_OK(dev);
  ExpectContent(**dev, data);
}

TEST_P(FormatVersion, NewerVersionIsRefusedWithAClearErrorAndLeftAlone) {
  Populate();
  SetStoredVersion(3);
  for (bool read_only : {true, false}) {
    auto dev = Open(Spec(), OpenOptions{.read_only = read_only});
    ASSERT_FALSE(dev);
    EXPECT_EQ(dev.error().code, make_error_code(Errc::kNotSupported));
    const std::string& m = dev.error().message;
    EXPECT_NE(m.find("format version 3"), std::string::npos) << m;
    EXPECT_NE(m.find("reads versions 1 to 2"), std::string::npos) << m;
    EXPECT_NE(m.find("open it with a newer vstack"), std::string::npos) << m;
  }
  EXPECT_EQ(StoredVersion(), 3u);
}

INSTANTIATE_TEST_SUITE_P(Layers, FormatVersion,
                         ::testing::Values(Layer{"dedup", "VSDEDUP1"}, Layer{"zstd", "VSZSTD01"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace vstack::testing
