// --diskspd and --fio-job: a seed's diskspd command line or fio job file becomes vstack bench's
// knobs; what it leaves out takes that tool's own default (each checked here, as docs/bench.md
// lists them); what has no equivalent is refused by name; the translation is printed and runs.
#include "bench/workload/foreign_args.h"

#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/testing/test_util.h"

namespace vstack::bench {
namespace {

// The knob `flag` of a translation, or a knob with flag "" if there is none.
ForeignKnob Knob(const ForeignArgs& a, const std::string& flag) {
  for (const ForeignKnob& k : a.knobs) {
    if (k.flag == flag) return k;
  }
  return {};
}

struct Expected {
  std::string flag, value;
};

// Every knob of `a` in `expected` has that value and `source`.
void ExpectKnobs(const ForeignArgs& a, const std::vector<Expected>& expected, KnobSource source) {
  for (const Expected& e : expected) {
    const ForeignKnob k = Knob(a, e.flag);
    EXPECT_EQ(k.flag, e.flag) << "missing " << e.flag;
    EXPECT_EQ(k.value, e.value) << e.flag;
    EXPECT_EQ(k.source, source) << e.flag;
  }
}

TEST(ForeignArgs, DiskspdCommandLineBecomesKnobs) {
  auto t = TranslateDiskspd("-b8K -d300 -o8 -t4 -r -w50 -L -Sh -c1G /var/tmp/t.dat");
  ASSERT_TRUE(testing::IsOk(t));
  EXPECT_EQ(KnobsText(*t, KnobSource::kGiven),
            "--bs 8K --write-pct 50 --pattern random --qd 8 --threads 4 --duration 300s "
            "--size 1G --direct on");
  ASSERT_EQ(t->targets.size(), 1u);
  EXPECT_EQ(t->targets[0], "/var/tmp/t.dat");
  // -Sh is write-through as well as unbuffered: said, as vstack's writes are not FUA.
  ASSERT_EQ(t->notes.size(), 2u);
  EXPECT_EQ(t->notes[0].rfind("-L:", 0), 0u);
  EXPECT_EQ(t->notes[1].rfind("-Sh: diskspd also writes through (each write durable, FUA)", 0), 0u)
      << t->notes[1];
  auto seq = TranslateDiskspd("-si -b64K -w0 -Z -z7");
  ASSERT_TRUE(testing::IsOk(seq));
  EXPECT_EQ(KnobsText(*seq, KnobSource::kGiven),
            "--bs 64K --write-pct 0 --pattern sequential --content zeros --seed 7");
  for (const char* random : {"-Zr", "-Z1G"}) {
    auto z = TranslateDiskspd(random);
    ASSERT_TRUE(testing::IsOk(z)) << random;
    ExpectKnobs(*z, {{"--content", "random"}}, KnobSource::kGiven);
  }
  auto suw = TranslateDiskspd("-Suw -w");
  ASSERT_TRUE(testing::IsOk(suw));
  ExpectKnobs(*suw, {{"--direct", "on"}, {"--write-pct", "0"}}, KnobSource::kGiven);
  ASSERT_EQ(suw->notes.size(), 1u);
  EXPECT_EQ(suw->notes[0].rfind("-Suw: diskspd also writes through", 0), 0u);
  auto su = TranslateDiskspd("-Su");
  ASSERT_TRUE(testing::IsOk(su));
  EXPECT_TRUE(su->notes.empty()) << "-Su is unbuffered only";
}

// Each of diskspd's defaults (`diskspd -?`; docs/bench.md), for a command that gives nothing,
// and the command's own value where it gives one.
TEST(ForeignArgs, DiskspdLeavesOutItsOwnDefaults) {
  auto t = TranslateDiskspd("");
  ASSERT_TRUE(testing::IsOk(t));
  const std::vector<Expected> defaults = {{"--bs", "64K"},
                                          {"--write-pct", "0"},
                                          {"--pattern", "sequential"},
                                          {"--qd", "2"},
                                          {"--threads", "1"},
                                          {"--duration", "10s"},
                                          {"--warmup", "5s"},
                                          {"--size", "0"},
                                          {"--direct", "off"},
                                          {"--content", "pattern"},
                                          {"--distribution", "uniform"},
                                          {"--flush-interval", "0"}};
  ExpectKnobs(*t, defaults, KnobSource::kToolDefault);
  EXPECT_EQ(t->knobs.size(), defaults.size()) << "every knob, once";
  EXPECT_EQ(Knob(*t, "--seed").flag, "") << "a seed only when given";
  EXPECT_EQ(Knob(*t, "--ios").flag, "");

  // The example: 64 KiB random reads, 1 thread x QD2, a 5 s warm-up, as diskspd runs it.
  auto r = TranslateDiskspd("-d1 -r");
  ASSERT_TRUE(testing::IsOk(r));
  ExpectKnobs(*r, {{"--duration", "1s"}, {"--pattern", "random"}}, KnobSource::kGiven);
  ExpectKnobs(*r,
              {{"--bs", "64K"},
               {"--qd", "2"},
               {"--threads", "1"},
               {"--write-pct", "0"},
               {"--warmup", "5s"}},
              KnobSource::kToolDefault);
  EXPECT_EQ(TranslationText(*r, ""),
            "--pattern random --duration 1s; diskspd's defaults for what it leaves out: --bs 64K "
            "--write-pct 0 --qd 2 --threads 1 --warmup 5s --size 0 (the whole target) --direct "
            "off --content pattern --distribution uniform --flush-interval 0");
}

// The seed of docs/presets.md's KVM-vs-Hyper-V pair (issue 32) ran this line: it translates to
// that run, with diskspd's own 5 s warm-up and its buffers (the published output's defaults).
TEST(ForeignArgs, TheKvmVsHypervSeedLineRunsAsPublished) {
  auto t = TranslateDiskspd("-b8K -d300 -h -L -o8 -t4 -r -w50 -c10G");
  ASSERT_TRUE(testing::IsOk(t));
  ExpectKnobs(*t,
              {{"--bs", "8K"},
               {"--duration", "300s"},
               {"--direct", "on"},
               {"--qd", "8"},
               {"--threads", "4"},
               {"--pattern", "random"},
               {"--write-pct", "50"},
               {"--size", "10G"}},
              KnobSource::kGiven);
  ExpectKnobs(*t, {{"--warmup", "5s"}, {"--content", "pattern"}}, KnobSource::kToolDefault);
}

TEST(ForeignArgs, DiskspdOptionsWithoutEquivalentAreNamed) {
  for (const char* bad :
       {"-g100", "-D", "-r8K", "-x", "-ag", "-Sw", "-Sr", "-Z1G,buf.dat", "#1", "c:\\test.dat"}) {
    auto t = TranslateDiskspd(std::string("-b4K ") + bad);
    ASSERT_FALSE(t) << bad;
    EXPECT_NE(t.error().message.find(std::string("'") + bad + "'"), std::string::npos)
        << t.error().message;
  }
  auto t = TranslateDiskspd("-o eight");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("-o"), std::string::npos) << t.error().message;
}

// Two options that set one thing are refused, naming both (-t8 -F2 ran 2 threads, -r -si ran
// sequentially, -Sb -Su went by the last); -r<align> equal to the block size is plain -r.
TEST(ForeignArgs, DiskspdOptionsSettingOneThingTwiceAreRefused) {
  for (const auto& [line, first, second] : std::vector<std::array<std::string, 3>>{
           {"-t8 -F2", "-t8", "-F2"},
           {"-r -si", "-r", "-si"},
           {"-Sb -Su", "-Sb", "-Su"},
           {"-h -Sb", "-h", "-Sb"},
           {"-b4K -b8K", "-b4K", "-b8K"},
           {"-c1G -f2G", "-c1G", "-f2G"},
           {"-w10 -w20", "-w10", "-w20"}}) {
    auto t = TranslateDiskspd(line);
    ASSERT_FALSE(t) << line;
    EXPECT_NE(t.error().message.find("'" + first + "' and '" + second + "'"), std::string::npos)
        << t.error().message;
  }
  for (const char* line : {"-b8K -r8K", "-r64K", "-r8k -b8K"}) {
    auto t = TranslateDiskspd(line);
    ASSERT_TRUE(testing::IsOk(t)) << line;
    ExpectKnobs(*t, {{"--pattern", "random"}}, KnobSource::kGiven);
  }
}

TEST(ForeignArgs, FioJobFileBecomesKnobs) {
  auto t = TranslateFioJob(
      "; a seed's job\n[global]\nioengine=libaio\ndirect=1\ntime_based\nruntime=60\n"
      "ramp_time=5\n\n[randrw-8k]\nrw=randrw\nrwmixread=70\nbs=8k\niodepth=16\nnumjobs=2\n"
      "size=512m\nfilename=/var/tmp/fio.dat\nrandom_distribution=zipf:1.2\n");
  ASSERT_TRUE(testing::IsOk(t));
  EXPECT_EQ(KnobsText(*t, KnobSource::kGiven),
            "--bs 8K --write-pct 30 --pattern random --qd 16 --threads 2 --duration 60s "
            "--warmup 5s --size 512M --direct on --distribution zipf:1.2");
  ASSERT_EQ(t->targets.size(), 1u);
  EXPECT_EQ(t->targets[0], "/var/tmp/fio.dat");
  auto rd = TranslateFioJob("[job]\nrw=read\n");
  ASSERT_TRUE(testing::IsOk(rd));
  EXPECT_EQ(KnobsText(*rd, KnobSource::kGiven), "--write-pct 0 --pattern sequential");
}

// fio's sizes as fio reads them (kb_base=1024, its default): k and kb are 1024, KiB is 1000
// (they ran as 4096 and 64 MiB where fio runs 4000 and 64,000,000 bytes); runtime=0 is no
// limit (it was refused as "--duration 0s").
TEST(ForeignArgs, FioUnitsAndRuntimeAsFioReadsThem) {
  auto t = TranslateFioJob("[a]\nrw=randread\nsize=64MiB\nbs=4KiB\n");
  ASSERT_TRUE(testing::IsOk(t));
  EXPECT_EQ(Knob(*t, "--bs").value, "4000");
  EXPECT_EQ(Knob(*t, "--size").value, "64000000");
  bool said = false;
  for (const std::string& n : t->notes)
    said |= n.find("bs=4KiB: fio reads KiB as a power of 10") == 0;
  EXPECT_TRUE(said) << "a note says why 4KiB is 4000 bytes";
  auto kb = TranslateFioJob("[a]\nbs=16kb\nsize=1g\n");
  ASSERT_TRUE(testing::IsOk(kb));
  EXPECT_EQ(Knob(*kb, "--bs").value, "16K");
  EXPECT_EQ(Knob(*kb, "--size").value, "1G");
  for (const char* bad : {"bs=4x\n", "bs=k\n", "bs=4kibb\n", "size=99999999999999999p\n"}) {
    EXPECT_FALSE(TranslateFioJob(std::string("[a]\n") + bad)) << bad;
  }
  auto commented = TranslateFioJob("[a]\nrw=randread # c\nbs=8k\t; eight\n");
  ASSERT_TRUE(testing::IsOk(commented)) << "fio takes a comment that ends a line";
  EXPECT_EQ(Knob(*commented, "--pattern").value, "random");
  EXPECT_EQ(Knob(*commented, "--bs").value, "8K");
  auto split = TranslateFioJob("[a]\nbs=4k,8k\n");
  ASSERT_FALSE(split);
  EXPECT_NE(split.error().message.find("has no equivalent in vstack bench (a block size per "
                                       "direction; give one)"),
            std::string::npos)
      << split.error().message;
  auto unlimited = TranslateFioJob("[a]\nrw=randread\nsize=64m\nruntime=0\n");
  ASSERT_TRUE(testing::IsOk(unlimited));
  EXPECT_EQ(Knob(*unlimited, "--duration").flag, "") << "runtime=0: no time limit";
  EXPECT_EQ(Knob(*unlimited, "--ios").value, "16384") << "size / bs, as fio does";
}

// Sequential I/O from several threads starts each at the file's start in the tools, and in a
// region of its own in vstack bench: a note says so (it ran with no word).
TEST(ForeignArgs, SequentialThreadsAreNotedAsDifferent) {
  auto fio = TranslateFioJob("[a]\nrw=read\nnumjobs=2\n");
  ASSERT_TRUE(testing::IsOk(fio));
  auto has = [](const ForeignArgs& a, const std::string& text) {
    return std::any_of(a.notes.begin(), a.notes.end(),
                       [&](const std::string& n) { return n.find(text) == 0; });
  };
  EXPECT_TRUE(has(*fio, "rw=read with numjobs=2: fio's threads all start at the target's start"));
  auto diskspd = TranslateDiskspd("-s -t4 -b64K");
  ASSERT_TRUE(testing::IsOk(diskspd));
  EXPECT_TRUE(has(*diskspd, "sequential I/O with -t4: diskspd's threads all start"));
  auto one = TranslateFioJob("[a]\nrw=read\n");
  auto random = TranslateDiskspd("-r -t4");
  ASSERT_TRUE(testing::IsOk(one));
  ASSERT_TRUE(testing::IsOk(random));
  EXPECT_FALSE(has(*one, "rw=read"));
  EXPECT_FALSE(has(*random, "sequential"));
}

// Each of fio's defaults (its HOWTO; docs/bench.md), for a job that gives nothing.
TEST(ForeignArgs, FioLeavesOutItsOwnDefaults) {
  auto t = TranslateFioJob("[job]\n");
  ASSERT_TRUE(testing::IsOk(t));
  const std::vector<Expected> defaults = {{"--bs", "4K"},
                                          {"--write-pct", "0"},
                                          {"--pattern", "sequential"},
                                          {"--qd", "1"},
                                          {"--threads", "1"},
                                          {"--warmup", "0s"},
                                          {"--size", "0"},
                                          {"--direct", "off"},
                                          {"--content", "random"},
                                          {"--distribution", "uniform"},
                                          {"--flush-interval", "0"},
                                          {"--dedupe-pct", "0"},
                                          {"--compress-pct", "0"}};
  ExpectKnobs(*t, defaults, KnobSource::kToolDefault);
  // Neither runtime nor size: fio would do the whole file; vstack's window, said to be vstack's.
  ExpectKnobs(*t, {{"--duration", "2s"}}, KnobSource::kVstack);
  EXPECT_EQ(t->knobs.size(), defaults.size() + 1);
  EXPECT_NE(TranslationText(*t, "").find("vstack bench's own (fio sets no such limit): "
                                         "--duration 2s"),
            std::string::npos)
      << TranslationText(*t, "");

  // The example: rw=randread alone is 4 KiB random reads, 1 job at QD1.
  auto r = TranslateFioJob("[seed]\nrw=randread\n");
  ASSERT_TRUE(testing::IsOk(r));
  ExpectKnobs(*r, {{"--pattern", "random"}, {"--write-pct", "0"}}, KnobSource::kGiven);
  ExpectKnobs(*r, {{"--bs", "4K"}, {"--qd", "1"}, {"--threads", "1"}}, KnobSource::kToolDefault);

  // A mixed rw without rwmixread/rwmixwrite: fio's 50/50.
  auto mix = TranslateFioJob("[mix]\nrw=randrw\n");
  ASSERT_TRUE(testing::IsOk(mix));
  ExpectKnobs(*mix, {{"--write-pct", "50"}}, KnobSource::kToolDefault);

  // No runtime: each job stops after size bytes.
  auto sized = TranslateFioJob("[s]\nsize=64m\nbs=8k\nnumjobs=2\nrw=randwrite\n");
  ASSERT_TRUE(testing::IsOk(sized));
  ExpectKnobs(*sized, {{"--ios", "16384"}}, KnobSource::kToolDefault);  // 2 x 64 MiB / 8 KiB
  EXPECT_EQ(Knob(*sized, "--duration").flag, "");
}

// fio's default engine, psync, is synchronous: one I/O in flight per job whatever iodepth says.
TEST(ForeignArgs, FioIodepthCountsOnlyWithAnAsynchronousEngine) {
  for (const char* engine : {"", "ioengine=psync\n", "ioengine=sync\n"}) {
    auto t = TranslateFioJob(std::string("[j]\n") + engine + "iodepth=32\n");
    ASSERT_TRUE(testing::IsOk(t)) << engine;
    EXPECT_EQ(Knob(*t, "--qd").value, "1") << engine;
    bool said = false;
    for (const std::string& n : t->notes) said |= n.find("iodepth=32 with the synchronous") == 0;
    EXPECT_TRUE(said) << engine;
  }
  for (const char* engine : {"ioengine=libaio\n", "ioengine=io_uring\n"}) {
    auto t = TranslateFioJob(std::string("[j]\n") + engine + "iodepth=32\n");
    ASSERT_TRUE(testing::IsOk(t)) << engine;
    EXPECT_EQ(Knob(*t, "--qd").value, "32") << engine;
  }
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
        Case{"[a]\nbs=4k\n[b]\nbs=8k\n", "[a] and [b]"},
        // Out of range: refused, not clamped (150 ran as 0% writes) nor thrown past the
        // parser (a number beyond int ended the process).
        Case{"[a]\nrw=randrw\nrwmixread=150\n", "'150' is not a percentage"},
        Case{"[a]\nrw=randrw\nrwmixread=99999999999\n", "is not a percentage"},
        Case{"[a]\nrw=randrw\nrwmixwrite=101\n", "'101' is not a percentage"}}) {
    auto t = TranslateFioJob(c.job);
    ASSERT_FALSE(t) << c.job;
    EXPECT_NE(t.error().message.find(c.named), std::string::npos) << t.error().message;
  }
}

// The translation is printed and run, defaults included; options typed on the command line win
// over it (a typed --duration over the translated --ios too).
TEST(ForeignArgs, BenchRunsADiskspdLineAndAFioJob) {
  testing::TempDir dir;
  const std::string quick =
      " --stack memory:16M --size 16M --rounds 1 --warmup 0 --ios 200 --no-report --quiet "
      "--output=json";
  auto knobs = [](const testing::CommandResult& r) {
    const size_t from = r.output.find("\n{") + 1, to = r.output.rfind("\n}") + 2;
    return nlohmann::json::parse(r.output.substr(from, to - from))["knobs"];
  };
  // (--duration typed, so not the quick runs' --ios: both would set the window.)
  std::string timed_quick = quick;
  timed_quick.replace(timed_quick.find(" --ios 200"), 10, "");
  testing::CommandResult d = testing::RunVstack(
      "bench --diskspd \"-b8K -d300 -o4 -t2 -r -w50 -L\" --duration 0.2s" + timed_quick);
  ASSERT_EQ(d.status, 0) << d.output;
  EXPECT_NE(d.output.find("vstack bench: --diskspd \"-b8K -d300 -o4 -t2 -r -w50 -L\" runs as "
                          "--bs 8K --write-pct 50 --pattern random --qd 4 --threads 2 "
                          "--duration 300s; diskspd's defaults for what it leaves out: --warmup "
                          "5s --size 0 (the whole target) --direct off --content pattern"),
            std::string::npos)
      << d.output;
  for (const char* kept : {"--duration as given", "--warmup as given", "--size as given"}) {
    EXPECT_NE(d.output.find(kept), std::string::npos) << kept << "\n" << d.output;
  }
  EXPECT_EQ(knobs(d)["block_size"], 8192);
  EXPECT_EQ(knobs(d)["content"], "pattern");

  // Nothing but -r: diskspd's 64 KiB, QD2, 1 thread, reads only.
  testing::CommandResult r = testing::RunVstack("bench --diskspd \"-r\"" + quick);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(knobs(r)["block_size"], 65536);
  EXPECT_EQ(knobs(r)["queue_depth"], 2);
  EXPECT_EQ(knobs(r)["threads"], 1);
  EXPECT_EQ(knobs(r)["write_pct"], 0);

  const std::string job = dir.File("seed.fio");
  std::ofstream(job) << "[seed]\nrw=randwrite\nbs=16k\niodepth=2\nioengine=libaio\n";
  testing::CommandResult f = testing::RunVstack("bench --fio-job " + job + quick);
  ASSERT_EQ(f.status, 0) << f.output;
  EXPECT_NE(f.output.find("runs as --bs 16K --write-pct 100 --pattern random --qd 2; fio's "
                          "defaults for what it leaves out: --threads 1"),
            std::string::npos)
      << f.output;
  EXPECT_EQ(knobs(f)["block_size"], 16384);
  EXPECT_EQ(knobs(f)["threads"], 1);

  // A job with size= and no runtime runs a count of I/Os, unless --duration is typed.
  std::ofstream(job) << "[sized]\nrw=randread\nsize=1m\n";
  testing::CommandResult c = testing::RunVstack(
      "bench --fio-job " + job +
      " --stack memory:16M --size 16M --rounds 1 --warmup 0 --no-report --quiet --output=json");
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_EQ(knobs(c)["io_count"], 256);  // 1 MiB / 4 KiB
  testing::CommandResult timed = testing::RunVstack(
      "bench --fio-job " + job +
      " --stack memory:16M --size 16M --rounds 1 --warmup 0 --duration 0.2s --no-report --quiet "
      "--output=json");
  ASSERT_EQ(timed.status, 0) << timed.output;
  EXPECT_EQ(knobs(timed)["io_count"], 0);
  EXPECT_NE(timed.output.find("--duration as given on the command line"), std::string::npos)
      << timed.output;

  // What fio refuses is refused, not run with fio's defaults: no job, or a directory.
  for (const char* text : {"", "; nothing\n", "[global]\nrw=randwrite\nbs=8k\n"}) {
    std::ofstream(job) << text;
    testing::CommandResult none = testing::RunVstack("bench --fio-job " + job + quick);
    EXPECT_EQ(none.status, 2) << text << none.output;
    EXPECT_NE(none.output.find("fio job file: no job defined"), std::string::npos) << none.output;
  }
  testing::CommandResult folder = testing::RunVstack("bench --fio-job " + dir.path() + quick);
  EXPECT_EQ(folder.status, 1) << folder.output;  // as a missing file (and `space merge DIR`)
  EXPECT_NE(folder.output.find("is a directory; give a fio job file"), std::string::npos)
      << folder.output;
  // A job file that cannot be read says why (it said only "cannot read").
  const std::string missing = dir.File("none.fio");
  testing::CommandResult gone = testing::RunVstack("bench --fio-job " + missing + quick);
  EXPECT_EQ(gone.status, 1) << gone.output;
  EXPECT_NE(gone.output.find("vstack bench: --fio-job: cannot read '" + missing +
                             "': No such file or directory"),
            std::string::npos)
      << gone.output;

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
  // Text that is neither a stack nor a path (a name given fio-style, "a=SPEC") got the same
  // hint, a nonsense spec: "file:a=file:...,create=on,size=1G".
  testing::CommandResult named =
      testing::RunVstack("bench --stack a=file:" + dir.File("none.raw") + " --no-report");
  EXPECT_EQ(named.status, 2) << named.output;
  EXPECT_NE(named.output.find("cannot open 'a=file:" + dir.File("none.raw") + "'"),
            std::string::npos)
      << named.output;
  EXPECT_EQ(named.output.find("create=on"), std::string::npos) << named.output;
}

}  // namespace
}  // namespace vstack::bench
