// The vstack command line as a new user meets it: unknown commands and options are named with
// the nearest valid one, `vstack help` works, --help pages are clean, and every command follows
// one exit-code policy (0 success, 1 error, 2 usage error; check and compare keep qemu-img's).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/testing/test_util.h"

namespace vstack {
namespace {

using testing::CommandResult;
using testing::RunVstack;
using testing::TempDir;

bool Has(const CommandResult& r, const std::string& text) {
  return r.output.find(text) != std::string::npos;
}

TEST(CliUsage, UnknownCommandsAndOptionsSuggestTheNearestOne) {
  CommandResult inf = RunVstack("inf x");
  EXPECT_EQ(inf.status, 2) << inf.output;
  EXPECT_TRUE(Has(inf, "vstack: unknown command 'inf'; did you mean `info`?")) << inf.output;

  CommandResult stak = RunVstack("bench --stak raw");
  EXPECT_EQ(stak.status, 2) << stak.output;
  EXPECT_TRUE(Has(stak, "vstack bench: unknown option '--stak'; did you mean `--stack`?"))
      << stak.output;
  EXPECT_FALSE(Has(stak, "were not expected")) << stak.output;

  CommandResult far = RunVstack("info --frobnicate memory:1M");
  EXPECT_EQ(far.status, 2);
  EXPECT_TRUE(Has(far, "vstack info: unknown option '--frobnicate'\n")) << far.output;

  CommandResult yaml = RunVstack("info --output=yaml memory:1M");
  EXPECT_EQ(yaml.status, 2) << yaml.output;
  EXPECT_TRUE(Has(yaml, "vstack info: --output: 'yaml' is not one of text|json")) << yaml.output;
  EXPECT_FALSE(Has(yaml, "->")) << yaml.output;

  CommandResult jsn = RunVstack("map --output jsn memory:1M");
  EXPECT_TRUE(Has(jsn, "did you mean `json`?")) << jsn.output;

  CommandResult none = RunVstack("");
  EXPECT_EQ(none.status, 2);
  EXPECT_TRUE(Has(none, "vstack: a command is required")) << none.output;
  EXPECT_TRUE(Has(none, "vstack help")) << none.output;

  CommandResult missing = RunVstack("info");
  EXPECT_EQ(missing.status, 2);
  EXPECT_TRUE(Has(missing, "vstack info: ")) << missing.output;
}

TEST(CliUsage, HelpCommandShowsTheSameTextAsDashDashHelp) {
  CommandResult top = RunVstack("help");
  ASSERT_EQ(top.status, 0) << top.output;
  EXPECT_EQ(top.output, RunVstack("--help").output);
  EXPECT_TRUE(Has(top, "Exit status: 0 success, 1 error, 2 usage error")) << top.output;
  CommandResult info = RunVstack("help info");
  ASSERT_EQ(info.status, 0) << info.output;
  EXPECT_EQ(info.output, RunVstack("info --help").output);
  CommandResult bad = RunVstack("help inof");
  EXPECT_EQ(bad.status, 2);
  EXPECT_TRUE(Has(bad, "vstack help: unknown command 'inof'; did you mean `info`?")) << bad.output;
  EXPECT_TRUE(Has(bad, "Try `vstack help` for the commands.")) << bad.output;
}

// Every --help page (which help2man turns into the man pages) says what it does, without CLI11
// internals such as "ENUM:value in {json->1,text->0} OR {1,0}".
TEST(CliUsage, EveryHelpPageIsCompleteAndClean) {
  for (const char* cmd : {"bench", "info", "layers", "create", "check", "convert", "compare", "map",
                          "compact", "space", "serve", "help", "completion"}) {
    CommandResult h = RunVstack(std::string(cmd) + " --help");
    EXPECT_EQ(h.status, 0) << cmd;
    EXPECT_TRUE(Has(h, "Usage: vstack " + std::string(cmd))) << h.output;
    EXPECT_TRUE(Has(h, "Exit status: ")) << h.output;
    for (const char* internal : {"ENUM", "->", "OR {", "in {", "FAILED", "TEXT:"}) {
      EXPECT_FALSE(Has(h, internal)) << cmd << " --help shows '" << internal << "':\n" << h.output;
    }
  }
  EXPECT_TRUE(Has(RunVstack("info --help"), "--output text|json"));
  CommandResult top = RunVstack("--help");
  for (const char* cmd : {"bench", "convert", "serve", "help", "completion"}) {
    EXPECT_TRUE(Has(top, std::string("  ") + cmd)) << top.output;
  }
}

// One policy across commands: 0 success, 1 error (a file that is not there), 2 usage error (a
// bad flag or value), whichever part of vstack finds the mistake. check keeps 1 for usage
// errors (2 means corrupt there); compare keeps 2 for every error (1 means different).
TEST(CliUsage, OneExitCodePolicyAcrossCommands) {
  TempDir dir;
  const std::string img = dir.File("d.img");
  ASSERT_EQ(RunVstack("create " + img + " 1M").status, 0);
  struct Case {
    std::string args;
    int status;
  };
  const std::string none = dir.File("none.img");
  for (const Case& c : std::vector<Case>{
           {"info " + img, 0},
           {"info " + none, 1},
           {"info --output=yaml " + img, 2},
           {"info --nosuch " + img, 2},
           {"create " + dir.File("x") + " 10X", 2},
           {"create -f qcow3 " + dir.File("y") + " 1M", 2},
           {"create " + img + " 1M", 1},  // exists: an error, not a usage error
           {"map " + img, 0},
           {"map " + none, 1},
           {"map --output=xml " + img, 2},
           {"space --grain 3K " + img, 2},
           {"space --progress=maybe " + img, 2},
           {"space " + none, 1},
           {"bench --bs 3Q --no-report", 2},
           {"bench --pattern zigzag --no-report", 2},
           {"bench --stack nosuch --no-report", 2},
           {"bench --stak raw", 2},
           {"convert -O qcow3 " + img + " " + dir.File("z"), 2},
           {"convert " + none + " " + dir.File("z"), 1},
           {"compact " + none, 1},
           // -F names a format as create's -F does: a wrong one is a usage error for both (rebase
           // exited 1, create 2).
           {"create -f vhd -b " + img + " -F vhdx " + dir.File("c.vhd"), 2},
           {"rebase -F vhdx -b " + img + " " + img, 2},
           {"rebase -F qcow2 -b " + img + " " + img, 2},
           {"rebase -F vpc -b " + img + " " + none, 1},
           {"serve --port 70000 memory:1M", 2},
           {"layers --output=html", 2},
           {"check " + img, 0},
           {"check -r everything " + img, 1},  // check: usage errors are 1, corrupt is 2
           {"check --nosuch " + img, 1},
           {"compare " + img + " " + img, 0},
           {"compare " + img + " " + none, 2},
           {"compare --nosuch " + img + " " + img, 2},
           {"nosuch", 2},
           // A stack spec is part of the command line: a bad one is a usage error too.
           {"info 'dedup:grain=3K+memory:64M'", 2},
           {"info 'dedup:gran=4K+memory:64M'", 2},
           {"info vhdd+memory:1M", 2},
           {"info 'memory:1M,block=3'", 2},
           {"info 'dedup:verify=+memory:64M'", 2},  // an empty on/off value: not off
           {"info 'dedup:format=+memory:64M'", 2},
           {"info 'file:" + dir.File("e.img") + ",create='", 2},
           {"map 'zstd:level=99+memory:64M'", 2},
           {"check 'dedup:grain=3K+memory:64M'", 1},
           {"compare 'dedup:grain=3K+memory:64M' " + img, 2},
       }) {
    CommandResult r = RunVstack(c.args);
    EXPECT_EQ(r.status, c.status) << "vstack " << c.args << "\n" << r.output;
    if (c.status != 0) {
      EXPECT_EQ(r.output.rfind("vstack", 0), 0u) << "vstack " << c.args << "\n" << r.output;
    }
  }
}

// The line docs/cli.md promises at the end of every usage error, whichever part of vstack finds
// the mistake (CLI11, or the command's own checks).
TEST(CliUsage, UsageErrorsEndWithTheHelpLine) {
  TempDir dir;
  for (const auto& [args, topic] : std::vector<std::pair<std::string, std::string>>{
           {"create " + dir.File("x") + " 10X", "create"},
           {"create " + dir.File("x"), "create"},
           {"bench --bs 3Q --no-report", "bench"},
           {"info 'dedup:grain=3K+memory:64M'", "info"},
           {"info --output=yaml memory:1M", "info"}}) {
    CommandResult r = RunVstack(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
    EXPECT_TRUE(Has(r, "\nTry `vstack help " + topic + "` for usage.\n")) << args << "\n"
                                                                          << r.output;
  }
}

// `vstack frobnicate --help` is not a request for vstack's own help: the command is unknown.
TEST(CliUsage, HelpOfAnUnknownCommandIsAUsageError) {
  CommandResult r = RunVstack("frobnicate --help");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(Has(r, "vstack: unknown command 'frobnicate'")) << r.output;
  EXPECT_FALSE(Has(r, "Usage: vstack")) << r.output;
  CommandResult near = RunVstack("inof --help");
  EXPECT_EQ(near.status, 2) << near.output;
  EXPECT_TRUE(Has(near, "vstack: unknown command 'inof'; did you mean `info`?")) << near.output;
  EXPECT_EQ(RunVstack("info --help").status, 0);
  EXPECT_EQ(RunVstack("--help").status, 0);
}

// A mistyped format, pattern, layer or spec option is named with the nearest valid one.
TEST(CliUsage, DidYouMeanForFormatsPatternsLayersAndSpecOptions) {
  TempDir dir;
  struct Case {
    std::string args, says;
  };
  for (const Case& c :
       std::vector<Case>{{"create -f vpx " + dir.File("x") + " 1M", "did you mean `vpc`?"},
                         {"convert -O vhdxx memory:1M " + dir.File("y"), "did you mean `vhdx`?"},
                         {"bench --pattern randon --no-report", "did you mean `random`?"},
                         {"bench --content zero --no-report", "did you mean `zeros`?"},
                         {"info vhdd+memory:1M", "did you mean `vhd`?"},
                         {"info memroy:1M", "did you mean `memory`?"},
                         {"info 'dedup:gran=4K+memory:64M'", "did you mean `grain`?"}}) {
    CommandResult r = RunVstack(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.output;
    EXPECT_TRUE(Has(r, c.says)) << c.args << "\n" << r.output;
  }
}

// The option lines of `create -f`, `convert -O` and `convert -f` list every format the
// command takes, vhdx included.
TEST(CliUsage, FormatOptionsListEveryFormat) {
  auto option_line = [](const std::string& help, const std::string& option) {
    const size_t at = help.find("\n  " + option);
    return at == std::string::npos ? "" : help.substr(at + 1, help.find('\n', at + 1) - at - 1);
  };
  const std::string create = RunVstack("help create").output;
  const std::string convert = RunVstack("help convert").output;
  for (const std::string& line :
       {option_line(create, "-f,"), option_line(convert, "-O,"), option_line(convert, "-f,")}) {
    EXPECT_NE(line.find("raw|vhd|vhdx|vpc"), std::string::npos) << line << "\n"
                                                                << create << convert;
  }
}

}  // namespace
}  // namespace vstack
