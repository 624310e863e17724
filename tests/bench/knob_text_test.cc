// SetKnob and ApplyForeignArgs (bench/workload/knob_text.h): knobs by the CLI's names, the words
// of a refusal, and a foreign command line's knobs under the typed ones.
#include "bench/workload/knob_text.h"

#include <gtest/gtest.h>

#include "tests/testing/test_util.h"

namespace vstack::bench {
namespace {

TEST(KnobText, SetsKnobsByTheirFlagsAndRefusesWithTheFlagsName) {
  BenchKnobs k;
  ASSERT_TRUE(SetKnob(&k, "--bs", "16K"));
  ASSERT_TRUE(SetKnob(&k, "--qd", "32"));
  ASSERT_TRUE(SetKnob(&k, "--ios", "18446744073709551615"));
  ASSERT_TRUE(SetKnob(&k, "--allow-write", "on"));
  ASSERT_TRUE(SetKnob(&k, "--cpu-ready", "1.2,5.1"));
  ASSERT_TRUE(SetKnob(&k, "--ready-stall", "4ms,exp:2ms"));
  EXPECT_EQ(k.bs, "16K");
  EXPECT_EQ(k.qd, 32u);
  EXPECT_EQ(k.ios, UINT64_MAX);
  EXPECT_TRUE(k.allow_write);
  EXPECT_EQ(k.cpu_ready, (std::vector<double>{1.2, 5.1}));
  EXPECT_EQ(k.ready_stall, (std::vector<std::string>{"4ms", "exp:2ms"}));

  auto refused = [&](const std::string& flag, const std::string& text) {
    BenchKnobs before = k;
    Status st = SetKnob(&k, flag, text);
    EXPECT_EQ(k.qd, before.qd);  // unchanged
    return st ? std::string("accepted") : st.error().message;
  };
  EXPECT_EQ(refused("--qd", "x"), "--qd: 'x' is not a whole number from 0 to 4294967295");
  EXPECT_EQ(refused("--qd", "-1"), "--qd: '-1' is not a whole number from 0 to 4294967295");
  EXPECT_EQ(refused("--qd", "4294967296"), "--qd: '4294967296' is not a whole number from 0 to 4294967295");
  EXPECT_EQ(refused("--exchange", "yes"), "--exchange: 'yes' is not one of true|false|on|off|1|0");
  EXPECT_EQ(refused("--cpu-ready", "1,x"), "--cpu-ready: 'x' is not a number");
  EXPECT_EQ(refused("--qdd", "8"), "unknown knob '--qdd'; did you mean `--qd`?");
}

// Every knob SetKnob takes is an option of `vstack bench`, so the two name the same things.
TEST(KnobText, EveryKnobIsAnOptionOfVstackBench) {
  testing::CommandResult help = testing::RunVstack("bench --help");
  ASSERT_EQ(help.status, 0) << help.output;
  for (const std::string& flag : KnobFlags()) {
    EXPECT_NE(help.output.find(flag + " "), std::string::npos) << flag;
  }
}

TEST(KnobText, TypedKnobsWinOverTheTranslation) {
  BenchKnobs k;
  k.duration = "1s";
  auto line = ApplyForeignArgs("-b8K -d300 -o4 -t2 -r -w50", "", {"--duration", "--qd"}, &k);
  ASSERT_TRUE(line) << line.error().message;
  EXPECT_EQ(k.bs, "8K");
  EXPECT_EQ(k.threads, 2u);
  EXPECT_EQ(k.duration, "1s");  // typed; the translated --duration 300s is dropped
  EXPECT_EQ(k.qd, 8u);           // typed (the default value, but typed)
  EXPECT_NE(line->find("--diskspd \"-b8K -d300 -o4 -t2 -r -w50\" runs as --bs 8K"),
            std::string::npos)
      << *line;
  EXPECT_NE(line->find("; --qd as given on the command line; --duration as given"),
            std::string::npos)
      << *line;

  // A target becomes the stack unless one is given; a refusal leaves the knobs as they were.
  // The target is the file's bytes, opened as the tool opens it: buffered by default, O_DIRECT
  // with -Sh (it ran buffered while the line said "--direct on": 10x the IOPS).
  BenchKnobs t;
  ASSERT_TRUE(ApplyForeignArgs("-r d.img", "", {}, &t));
  EXPECT_EQ(t.stacks, std::vector<std::string>{"file:d.img"});
  BenchKnobs direct;
  auto sh = ApplyForeignArgs("-r -Sh d.img", "", {}, &direct);
  ASSERT_TRUE(sh) << sh.error().message;
  EXPECT_EQ(direct.stacks, std::vector<std::string>{"file:d.img,direct=on"});
  EXPECT_NE(sh->find("--stack file:d.img,direct=on"), std::string::npos) << *sh;
  BenchKnobs given;
  given.stacks = {"memory:16M"};
  auto ignored = ApplyForeignArgs("-r d.img", "", {"--stack"}, &given);
  ASSERT_TRUE(ignored);
  EXPECT_EQ(given.stacks, std::vector<std::string>{"memory:16M"});
  EXPECT_NE(ignored->find("the diskspd target is not used: --stack names the stacks"),
            std::string::npos)
      << *ignored;
  BenchKnobs before = t;
  auto bad = ApplyForeignArgs("-b8K -g500", "", {}, &t);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, make_error_code(Errc::kInvalidArgument));
  EXPECT_EQ(t.bs, before.bs);
  auto missing = ApplyForeignArgs("", "/nonexistent/job.fio", {}, &t);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, make_error_code(Errc::kIo));
  // A NUL byte would cut the job file's path short: another file read.
  auto nul = ApplyForeignArgs("", std::string("job.fio\0x", 9), {}, &t);
  ASSERT_FALSE(nul);
  EXPECT_EQ(nul.error().message, "the --fio-job path contains a NUL byte at position 7");
  EXPECT_EQ(ApplyForeignArgs("", "", {}, &t).value(), "");
}

}  // namespace
}  // namespace vstack::bench
