// The vstack CLI as a user runs it: exit codes, messages, and JSON that parses and agrees with
// the text.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/testing/test_util.h"

namespace vstack {
namespace {

using testing::CommandResult;
using testing::RunVstack;
using testing::TempDir;
using testing::WriteFile;

TEST(Cli, VersionAndHelp) {
  CommandResult v = RunVstack("--version");
  EXPECT_EQ(v.status, 0);
  EXPECT_NE(v.output.find("vstack 0."), std::string::npos) << v.output;
  for (const char* sub : {"info", "layers"}) {
    CommandResult h = RunVstack(std::string(sub) + " --help");
    EXPECT_EQ(h.status, 0) << sub;
    EXPECT_NE(h.output.find("Usage"), std::string::npos) << h.output;
  }
  CommandResult none = RunVstack("");
  EXPECT_NE(none.status, 0);
}

TEST(Cli, InfoTextAndJsonAgree) {
  CommandResult t = RunVstack("info passthrough+memory:64M");
  ASSERT_EQ(t.status, 0) << t.output;
  EXPECT_NE(t.output.find("virtual size:     67108864 (64 MiB)"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("[0] passthrough"), std::string::npos);
  EXPECT_NE(t.output.find("[1] memory"), std::string::npos);
  CommandResult j = RunVstack("info --output=json passthrough+memory:64M");
  ASSERT_EQ(j.status, 0) << j.output;
  auto doc = nlohmann::json::parse(j.output);
  EXPECT_EQ(doc["geometry"]["size_bytes"], 67108864u);
  ASSERT_EQ(doc["layers"].size(), 2u);
  EXPECT_EQ(doc["layers"][0]["kind"], "passthrough");
  EXPECT_EQ(doc["layers"][1]["kind"], "memory");
  EXPECT_EQ(doc["spec"], "passthrough+memory:64M");
}

TEST(Cli, BadInputGivesAClearErrorAndNonZeroStatus) {
  CommandResult r = RunVstack("info nosuch+memory:1M");
  EXPECT_EQ(r.status, 2);  // a bad spec is a usage error
  EXPECT_NE(r.output.find("vstack info: unknown layer 'nosuch'"), std::string::npos) << r.output;
  CommandResult m = RunVstack("info /nonexistent/disk.img");
  EXPECT_EQ(m.status, 1);
  EXPECT_NE(m.output.find("No such file or directory"), std::string::npos) << m.output;
  CommandResult o = RunVstack("info --output=xml memory:1M");
  EXPECT_NE(o.status, 0);
}

// info opens a spec read-only unless its file backend asks to create the file: create=on and
// its other true spellings (true, yes, 1) do, create=off/no/false/0 do not (create=no opened
// the file writable, and a missing file was reported "for reading and writing").
TEST(Cli, InfoOpensWritableOnlyForATrueCreate) {
  TempDir dir;
  const std::string old = dir.File("old.raw");
  WriteFile(old, 1 << 20, 0);
  const std::string missing = dir.File("missing.raw");
  for (const char* no : {"off", "no", "false", "0"}) {
    SCOPED_TRACE(no);
    CommandResult r = RunVstack("info file:" + old + ",create=" + no);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("1 MiB, read-only)"), std::string::npos) << r.output;
    CommandResult m = RunVstack("info file:" + missing + ",create=" + no + ",size=1M");
    EXPECT_EQ(m.status, 1) << m.output;
    EXPECT_NE(m.output.find("cannot open '" + missing + "' for reading: No such file"),
              std::string::npos)
        << m.output;
    EXPECT_FALSE(std::filesystem::exists(missing));
  }
  for (const char* yes : {"on", "yes", "true", "1"}) {
    SCOPED_TRACE(yes);
    CommandResult r = RunVstack("info file:" + missing + ",create=" + yes + ",size=1M");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output.find("read-only"), std::string::npos) << r.output;
    EXPECT_EQ(std::filesystem::file_size(missing), 1u << 20);
    std::filesystem::remove(missing);
  }
  // A value that is neither is the backend's usage error, and makes nothing.
  CommandResult bad = RunVstack("info file:" + missing + ",create=maybe,size=1M");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("option 'create': expected on or off, got 'maybe'"), std::string::npos)
      << bad.output;
  EXPECT_FALSE(std::filesystem::exists(missing));
}

// A new file in a directory that does not exist: the error names the directory, and gives no
// hint to use create=on (the command creates already; it said "No such file or directory (use
// create=on,size=N to create it)").
TEST(Cli, CreatingInAMissingDirectorySaysSo) {
  TempDir dir;
  const std::string nodir = dir.File("nodir");
  for (const std::string& args :
       {"create " + nodir + "/x.raw 1M", "create -f vhd " + nodir + "/x.vhd 1M",
        "convert -O raw memory:1M " + nodir + "/y.raw",
        "info file:" + nodir + "/z.raw,create=on,size=1M"}) {
    SCOPED_TRACE(args);
    CommandResult r = RunVstack(args);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("No such file or directory (directory '" + nodir + "' does not exist)"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("use create=on"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(nodir));
}

TEST(Cli, LayersListsEveryComponentInJson) {
  CommandResult j = RunVstack("layers --output=json");
  ASSERT_EQ(j.status, 0);
  auto doc = nlohmann::json::parse(j.output);
  std::set<std::string> names;
  for (auto& c : doc) names.insert(c["name"]);
  for (const char* n : {"memory", "null", "file", "uring", "passthrough"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
}

}  // namespace
}  // namespace vstack
