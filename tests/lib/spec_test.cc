#include "lib/spec.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "lib/registry.h"
#include "lib/size.h"
#include "tests/testing/test_util.h"

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

// A NUL byte cut the spec short wherever the C library read it ("file:x.raw\0junk,create=on"
// created x.raw): refused, saying where it is.
TEST(ParseSpec, RefusesANulByteSayingWhere) {
  using namespace std::string_literals;
  for (const std::string& spec :
       {"file:x.raw\0junk,create=on,size=1M"s, "memory:1M\0x"s, "\0"s, "dedup+\0memory:1M"s}) {
    auto r = ParseSpec(spec);
    ASSERT_FALSE(r) << spec.size();
    EXPECT_EQ(r.error().code, make_error_code(Errc::kBadSpec));
    EXPECT_EQ(r.error().message,
              "the spec contains a NUL byte at position " + std::to_string(spec.find('\0')));
  }
  EXPECT_TRUE(RefuseNul("a.raw", Errc::kInvalidArgument, "path"));
  Status path = RefuseNul("a.raw\0junk"s, Errc::kInvalidArgument, "path");
  ASSERT_FALSE(path);
  EXPECT_EQ(path.error().code, make_error_code(Errc::kInvalidArgument));
  EXPECT_EQ(path.error().message, "the path contains a NUL byte at position 5");
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

// The options whose declared default is on or off: the booleans, parsed by OptionValues::Bool.
std::vector<std::string> OnOffOptions(const std::vector<OptionInfo>& options) {
  std::vector<std::string> keys;
  for (const OptionInfo& o : options) {
    if (o.default_value == "on" || o.default_value == "off") keys.push_back(o.name);
  }
  return keys;
}

// A spec that reaches `info`'s option `key` with an empty value: a layer over memory, or the
// backend with a positional of the kind it takes (a path that does not exist, so the value must
// be refused before anything is opened or created).
std::string EmptyValueSpec(const ComponentInfo& info, const std::string& key,
                           const std::string& path) {
  if (info.kind == ComponentKind::kLayer) return info.name + ":" + key + "=+memory:64M";
  const std::string positional = info.positional == "SIZE"   ? "64M"
                                 : info.positional == "PATH" ? path
                                                             : "rbd/x";
  return info.name + ":" + positional + "," + key + "=";
}

// "dedup:verify=" meant verify=off, "file:x.img,create=" create=off: silently, while "block="
// and "stats=" were refused. Every on/off option of every component, in a spec or in create
// options, refuses an empty value with a usage error naming the option and the values.
TEST(OnOffOptions, AnEmptyValueIsAUsageErrorForEveryComponent) {
  testing::TempDir dir;
  const std::string path = dir.File("never.img");
  size_t checked = 0;
  for (const ComponentInfo* info : Registry::Global().All()) {
    for (const std::string& key : OnOffOptions(info->options)) {
      const std::string spec = EmptyValueSpec(*info, key, path);
      auto dev = Open(spec);
      ASSERT_FALSE(dev) << spec << " was accepted";
      EXPECT_EQ(dev.error().code, make_error_code(Errc::kBadSpec)) << dev.error().message;
      EXPECT_NE(dev.error().message.find(info->name + ": option '" + key +
                                         "': expected on or off (or true/false, yes/no, 1/0), "
                                         "got an empty value"),
                std::string::npos)
          << spec << ": " << dev.error().message;
      ++checked;
    }
    for (const std::string& key : OnOffOptions(info->create_options)) {
      if (key == "preallocate") continue;  // vhd's off|metadata|falloc|full: a choice
      Status s = CreateImage(info->name, path, 64 << 20, key + "=");
      ASSERT_FALSE(s) << info->name << " create option " << key << "= was accepted";
      EXPECT_NE(s.error().message.find("option '" + key + "': expected on or off"),
                std::string::npos)
          << s.error().message;
      ++checked;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "a refused option created a file";
  EXPECT_GE(checked, 10u) << "the registry lists fewer on/off options than it has";
}

TEST(OnOffOptions, SpellingsAndAnOmittedOption) {
  const std::vector<OptionInfo> declared = {{"flag", "", "off"}, {"bare", "", ""}};
  for (const char* on : {"on", "true", "yes", "1"}) {
    EXPECT_TRUE(*OptionValues("c", "", {{"flag", on}}, &declared).Bool("flag")) << on;
  }
  for (const char* off : {"off", "false", "no", "0"}) {
    EXPECT_FALSE(*OptionValues("c", "", {{"flag", off}}, &declared).Bool("flag")) << off;
  }
  const OptionValues none("c", "", {}, &declared);
  EXPECT_FALSE(*none.Bool("flag"));  // the default
  EXPECT_FALSE(*none.Bool("bare"));  // omitted, no default: off
  EXPECT_FALSE(OptionValues("c", "", {{"bare", ""}}, &declared).Bool("bare"));
}

}  // namespace
}  // namespace vstack
