// --diskspd and --fio-job: a seed's diskspd command line or fio job file becomes vstack bench's
// knobs; what has no equivalent is refused by name; the translation is printed and runs.
#include "tools/bench/foreign_args.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/test_util.h"

namespace vstack::cli {
namespace {

TEST(ForeignArgs, DiskspdCommandLineBecomesKnobs) {
  auto t = TranslateDiskspd("-b8K -d300 -o8 -t4 -r -w50 -L -Sh -c1G /var/tmp/t.dat");
  ASSERT_TRUE(testing::IsOk(t));
  EXPECT_EQ(KnobsText(*t),
            "--bs 8K --duration 300s --qd 8 --threads 4 --pattern random --write-pct 50 "
            "--direct on --size 1G");
  ASSERT_EQ(t->targets.size(), 1u);
  EXPECT_EQ(t->targets[0], "/var/tmp/t.dat");
  ASSERT_EQ(t->notes.size(), 1u);
  EXPECT_EQ(t->notes[0].rfind("-L:", 0), 0u);
  auto seq = TranslateDiskspd("-si -b64K -w0 -Z -z7");
  ASSERT_TRUE(testing::IsOk(seq));
  EXPECT_EQ(KnobsText(*seq),
            "--pattern sequential --bs 64K --write-pct 0 --content zeros --seed 7");
}

TEST(ForeignArgs, DiskspdOptionsWithoutEquivalentAreNamed) {
  for (const char* bad : {"-g100", "-D", "-r4K", "-x", "-ag", "-Sw", "#1", "c:\\test.dat"}) {
    auto t = TranslateDiskspd(std::string("-b4K ") + bad);
    ASSERT_FALSE(t) << bad;
    EXPECT_NE(t.error().message.find(std::string("'") + bad + "'"), std::string::npos)
        << t.error().message;
  }
  auto t = TranslateDiskspd("-o eight");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("-o"), std::string::npos) << t.error().message;
}

TEST(ForeignArgs, FioJobFileBecomesKnobs) {
  auto t = TranslateFioJob(
      "; a seed's job\n[global]\nioengine=libaio\ndirect=1\ntime_based\nruntime=60\n"
      "ramp_time=5\n\n[randrw-8k]\nrw=randrw\nrwmixread=70\nbs=8k\niodepth=16\nnumjobs=2\n"
      "size=512m\nfilename=/var/tmp/fio.dat\nrandom_distribution=zipf:1.2\n");
  ASSERT_TRUE(testing::IsOk(t));
  EXPECT_EQ(KnobsText(*t),
            "--direct on --duration 60s --warmup 5s --pattern random --bs 8K --qd 16 --threads 2 "
            "--size 512M --distribution zipf:1.2 --write-pct 30");
  ASSERT_EQ(t->targets.size(), 1u);
  EXPECT_EQ(t->targets[0], "/var/tmp/fio.dat");
  auto rd = TranslateFioJob("[job]\nrw=read\n");
  ASSERT_TRUE(testing::IsOk(rd));
  EXPECT_EQ(KnobsText(*rd), "--pattern sequential --write-pct 0");
}

TEST(ForeignArgs, FioOptionsWithoutEquivalentAreNamed) {
  struct Case {
    const char* job;
    const char* named;
  };
  for (const Case& c :
       {Case{"[a]\nverify=crc32c\n", "'verify'"}, Case{"[a]\nrw=trim\n", "'rw=trim'"},
        Case{"[a]\nrate_iops=100\n", "'rate_iops'"},
        Case{"[a]\nrandom_distribution=pareto:0.9\n", "'random_distribution"},
        Case{"[a]\nbs=4k\n[b]\nbs=8k\n", "[a] and [b]"}}) {
    auto t = TranslateFioJob(c.job);
    ASSERT_FALSE(t) << c.job;
    EXPECT_NE(t.error().message.find(c.named), std::string::npos) << t.error().message;
  }
}

// The translation is printed and run; options typed on the command line win over it.
TEST(ForeignArgs, BenchRunsADiskspdLineAndAFioJob) {
  testing::TempDir dir;
  const std::string quick =
      " --stack memory:16M --size 16M --rounds 1 --warmup 0 --ios 200 --no-report --quiet "
      "--output=json";
  testing::CommandResult d =
      testing::RunVstack("bench --diskspd \"-b8K -d300 -o4 -t2 -r -w50 -L\" --duration 1s" + quick);
  ASSERT_EQ(d.status, 0) << d.output;
  EXPECT_NE(d.output.find("vstack bench: --diskspd \"-b8K -d300 -o4 -t2 -r -w50 -L\" runs as "
                          "--bs 8K --duration 300s --qd 4 --threads 2 --pattern random "
                          "--write-pct 50; --duration as given on the command line; -L: "),
            std::string::npos)
      << d.output;
  EXPECT_NE(d.output.find("\"block_size\": 8192"), std::string::npos) << d.output;

  const std::string job = dir.File("seed.fio");
  std::ofstream(job) << "[seed]\nrw=randwrite\nbs=16k\niodepth=2\n";
  testing::CommandResult f = testing::RunVstack("bench --fio-job " + job + quick);
  ASSERT_EQ(f.status, 0) << f.output;
  EXPECT_NE(f.output.find("runs as --pattern random --bs 16K --qd 2 --write-pct 100"),
            std::string::npos)
      << f.output;
  EXPECT_NE(f.output.find("\"block_size\": 16384"), std::string::npos) << f.output;

  testing::CommandResult bad = testing::RunVstack("bench --diskspd \"-b8K -g500\"" + quick);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("vstack bench: diskspd option '-g500' has no equivalent"),
            std::string::npos)
      << bad.output;
}

// A plain path is a stack, like for every other command; a missing one says how to make it.
TEST(ForeignArgs, BenchTakesAPlainPathAsAStack) {
  testing::TempDir dir;
  const std::string raw = dir.File("src.raw");
  testing::WriteFile(raw, 8 << 20, 0);
  testing::CommandResult r = testing::RunVstack(
      "bench --stack " + raw + " --write-pct 0 --size 8M --rounds 1 --warmup 0 --ios 100 --no-report --quiet");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--stack " + raw + " runs the stack file:" + raw), std::string::npos)
      << r.output;
  testing::CommandResult missing =
      testing::RunVstack("bench --stack " + dir.File("none.raw") + " --no-report");
  EXPECT_EQ(missing.status, 2) << missing.output;
  EXPECT_NE(missing.output.find("file:" + dir.File("none.raw") + ",create=on,size=1G"),
            std::string::npos)
      << missing.output;
}

}  // namespace
}  // namespace vstack::cli
