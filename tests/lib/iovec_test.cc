#include "lib/iovec.h"

#include <gtest/gtest.h>

#include <numeric>

namespace vstack {
namespace {

TEST(Iovec, SliceCopyAndZeroAcrossPieces) {
  std::vector<char> a(10), b(5), c(20);
  std::vector<iovec> v = {{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
  EXPECT_EQ(IovLength(v.data(), 3), 35u);
  std::vector<char> src(35);
  std::iota(src.begin(), src.end(), 1);
  CopyToIov(v.data(), 3, 0, src.data(), 35);
  EXPECT_EQ(a[0], 1);
  EXPECT_EQ(b[0], 11);
  EXPECT_EQ(c[19], 35);
  std::vector<iovec> s;
  IovSlice(v.data(), 3, 8, 10, &s);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].iov_len, 2u);
  EXPECT_EQ(s[1].iov_len, 5u);
  EXPECT_EQ(s[2].iov_len, 3u);
  std::vector<char> out(10);
  CopyFromIov(v.data(), 3, 8, out.data(), 10);
  EXPECT_EQ(out[0], 9);
  EXPECT_EQ(out[9], 18);
  ZeroIov(v.data(), 3, 9, 7);
  EXPECT_EQ(a[8], 9);
  EXPECT_EQ(a[9], 0);
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[1], 17);
}

TEST(Iovec, IsZero) {
  std::vector<unsigned char> z(4099, 0);
  EXPECT_TRUE(IsZero(z.data(), z.size()));
  z[4098] = 1;
  EXPECT_FALSE(IsZero(z.data(), z.size()));
  z[4098] = 0;
  z[70] = 1;
  EXPECT_FALSE(IsZero(z.data(), z.size()));
  EXPECT_TRUE(IsZero(z.data(), 0));
}

}  // namespace
}  // namespace vstack
