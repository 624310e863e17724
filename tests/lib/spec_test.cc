#include "lib/spec.h"

#include <gtest/gtest.h>

#include "lib/size.h"

namespace vstack {
namespace {

TEST(ParseSpec, LayersThenBackendWithOptions) {
  auto parts = ParseSpec("dedup+zstd:level=1,grain=4K+vhd+file:/var/tmp/d.vhd,direct=on");
  ASSERT_TRUE(parts) << parts.error().ToString();
  ASSERT_EQ(parts->size(), 4u);
  EXPECT_EQ((*parts)[0], (SpecPart{"dedup", "", {}}));
  EXPECT_EQ((*parts)[1], (SpecPart{"zstd", "", {{"level", "1"}, {"grain", "4K"}}}));
  EXPECT_EQ((*parts)[2].name, "vhd");
  EXPECT_EQ((*parts)[3], (SpecPart{"file", "/var/tmp/d.vhd", {{"direct", "on"}}}));
}

TEST(ParseSpec, EscapesAndPathsWithEquals) {
  auto parts = ParseSpec("file:/tmp/a\\+b\\,c=d.img");
  ASSERT_TRUE(parts);
  EXPECT_EQ((*parts)[0].positional, "/tmp/a+b,c=d.img");
  auto eq = ParseSpec("file:/tmp/x=y");
  ASSERT_TRUE(eq);
  EXPECT_EQ((*eq)[0].positional, "/tmp/x=y");
  EXPECT_TRUE((*eq)[0].options.empty());
}

TEST(ParseSpec, RoundTripsThroughFormat) {
  for (const char* s : {"memory:64M", "passthrough+file:/a\\:b\\+c,direct=on",
                        "zstd:level=-3,rule=min-saving=12.5+null:1T"}) {
    auto parts = ParseSpec(s);
    ASSERT_TRUE(parts) << s;
    auto again = ParseSpec(FormatSpec(*parts));
    ASSERT_TRUE(again) << FormatSpec(*parts);
    EXPECT_EQ(*parts, *again) << s;
  }
}

TEST(ParseSpec, ErrorsNameTheProblem) {
  struct Case {
    const char* spec;
    const char* needle;
  } cases[] = {
      {"", "empty stack spec"},
      {"a++b", "empty part at character 3"},
      {"file:", "empty argument"},
      {"Foo:1", "invalid name 'Foo'"},
      {"file:/x,direct", "is not key=value"},
      {"file:/x,direct=on,direct=off", "given twice"},
      {"file:/x\\", "trailing backslash"},
      {"memory:1G+", "empty part"},
  };
  for (const Case& c : cases) {
    auto r = ParseSpec(c.spec);
    ASSERT_FALSE(r) << c.spec;
    EXPECT_NE(r.error().message.find(c.needle), std::string::npos)
        << c.spec << " -> " << r.error().message;
  }
}

TEST(ParseSize, SuffixesAndErrors) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("4K"), 4096u);
  EXPECT_EQ(*ParseSize("4k"), 4096u);
  EXPECT_EQ(*ParseSize("64M"), 64ull << 20);
  EXPECT_EQ(*ParseSize("64MiB"), 64ull << 20);
  EXPECT_EQ(*ParseSize("2T"), 2ull << 40);
  EXPECT_EQ(*ParseSize("1.5G"), 3ull << 29);
  EXPECT_EQ(*ParseSize("512B"), 512u);
  EXPECT_FALSE(ParseSize(""));
  EXPECT_FALSE(ParseSize("12Q"));
  EXPECT_FALSE(ParseSize("K"));
  EXPECT_FALSE(ParseSize("-1"));
  EXPECT_FALSE(ParseSize("99999999999999999999"));
  EXPECT_FALSE(ParseSize("20000000E"));
  EXPECT_FALSE(ParseSize("0.3K"));  // not a whole number of bytes
  EXPECT_NE(ParseSize("12Q").error().message.find("unknown suffix"), std::string::npos);
}

TEST(FormatSize, HumanReadable) {
  EXPECT_EQ(FormatSize(1000), "1000 B");
  EXPECT_EQ(FormatSize(4096), "4 KiB");
  EXPECT_EQ(FormatSize(64ull << 20), "64 MiB");
  EXPECT_EQ(FormatSize(3ull << 29), "1.5 GiB");
}

}  // namespace
}  // namespace vstack
