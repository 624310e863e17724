// vstack bench's knobs as a library call (bench/workload/bench_knobs.h, write_guard.h): every
// knob is refused with the command line's words before anything is created, the defaults make
// the default matrix with --rounds auto, a path becomes the spec its probe gives (said in a
// note), and a user's image is read-only or refused unless --allow-write.
#include "bench/workload/bench_knobs.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <functional>

#include "bench/workload/write_guard.h"
#include "tests/testing/test_util.h"

namespace vstack::bench {
namespace {

using testing::TempDir;

// The message PlanBench gives for `knobs`, or "" when it accepts them.
std::string Refusal(const BenchKnobs& k) {
  auto planned = PlanBench(k);
  if (planned) return "";
  EXPECT_EQ(planned.error().code, make_error_code(Errc::kInvalidArgument)) << planned.error().message;
  return planned.error().message;
}

TEST(BenchKnobs, EveryBadKnobIsRefusedWithTheCommandLinesWords) {
  TempDir dir;
  const std::pair<std::function<void(BenchKnobs&)>, const char*> cases[] = {
      {[](BenchKnobs& k) { k.bs = "1000"; }, "--bs: 1000 is not a positive multiple of 512"},
      {[](BenchKnobs& k) { k.bs = "4Q"; }, "--bs: invalid size '4Q'"},
      {[](BenchKnobs& k) { k.bs = "8G"; }, "--bs: 8G is too large"},
      {[](BenchKnobs& k) { k.write_pct = 120; }, "--write-pct: 120 is not in 0..100"},
      {[](BenchKnobs& k) { k.qd = 0; }, "--qd: 0 is not in 1..1024"},
      {[](BenchKnobs& k) { k.duration = "2parsecs"; },
       "--duration: '2parsecs' is not a time (e.g. 2s, 500ms, 1m)"},
      {[](BenchKnobs& k) { k.warmup = "-1s"; }, "--warmup: -1 s is not in [0, 3600] s"},
      {[](BenchKnobs& k) { k.duration = "--1"; }, "--duration: '--1' is not a time"},
      {[](BenchKnobs& k) { k.pattern = "diagonal"; },
       "--pattern: 'diagonal' is not one of random|sequential"},
      {[](BenchKnobs& k) { k.pattern = "randon"; }, "did you mean `random`?"},
      {[](BenchKnobs& k) { k.content = "ones"; },
       "--content: 'ones' is not one of random|zeros|pattern"},
      {[](BenchKnobs& k) { k.content = "zero"; }, "did you mean `zeros`?"},
      {[](BenchKnobs& k) { k.content = "pattern", k.compress_pct = 50; },
       "--content: pattern cannot be combined with --dedupe-pct or --compress-pct"},
      {[](BenchKnobs& k) { k.distribution = "zipf:1"; }, "--distribution: zipf theta"},
      {[](BenchKnobs& k) { k.rounds = "0"; }, "--rounds: '0' is neither auto nor in 1..1000"},
      {[](BenchKnobs& k) { k.rounds = "auto", k.precision = "2"; },
       "--precision: '2' is not a percentage such as 2%"},
      {[](BenchKnobs& k) { k.rounds = "auto", k.max_time = "soon"; },
       "--max-time: 'soon' is not a time"},
      {[](BenchKnobs& k) { k.ios = 100, k.duration = "1s"; },
       "--ios and --duration both set the measured window"},
      // Checked with fixed rounds too (they were ignored there, whatever they said).
      {[](BenchKnobs& k) { k.rounds = "3", k.precision = "-1%"; },
       "--precision: '-1%' is not a percentage such as 2%"},
      {[](BenchKnobs& k) { k.rounds = "3", k.precision = "200%"; },
       "--precision: '200%' is not a percentage such as 2%"},
      {[](BenchKnobs& k) { k.rounds = "3", k.max_time = "0"; }, "--max-time: '0' is not > 0"},
      {[](BenchKnobs& k) { k.backend = "spdk"; }, "--backend: 'spdk' is neither uring nor file"},
      {[](BenchKnobs& k) { k.direct = "maybe"; }, "--direct: 'maybe' is neither on nor off"},
      {[](BenchKnobs& k) { k.prepare = "later"; }, "--prepare: 'later' is not one of"},
      {[](BenchKnobs& k) { k.size = "0"; },
       "--size: stack 'raw' makes its own image and needs a size > 0"},
      {[](BenchKnobs& k) { k.stacks = {"nosuch"}; }, "'nosuch' is neither a named stack"},
      {[](BenchKnobs& k) { k.stacks = {"bogus+memory:1M"}; }, "unknown layer 'bogus'"},
      {[](BenchKnobs& k) { k.stacks = {"memory:8M"}, k.size = "16M"; },
       "--size 16 MiB is larger than stack 'memory:8M'"},
      {[](BenchKnobs& k) { k.preset = "hyperv-passthrough", k.stacks = {"raw"}; },
       "--preset brings its own stacks: drop --stack"},
      {[](BenchKnobs& k) { k.preset = "nosuch"; },
       "--preset: 'nosuch' is not one of hyperv-passthrough|kvm-vs-hyperv"},
      {[](BenchKnobs& k) { k.preset = "kvm-vs-hypervv"; }, "did you mean `kvm-vs-hyperv`?"},
      {[](BenchKnobs& k) { k.quantum = "20s"; }, "--quantum: '20s' is not in (0, 10s]"},
      {[](BenchKnobs& k) { k.cpu_ready = {150}; },
       "--cpu-ready: 150 is not a percentage in [0, 100)"},
      {[](BenchKnobs& k) {
         k.cpu_ready = {1, 1e5};
       },
       "--cpu-ready: 100000 is not a percentage in [0, 100)"},
      {[](BenchKnobs& k) { k.cpu_ready = {-0.25}; },
       "--cpu-ready: -0.25 is not a percentage in [0, 100)"},
      {[](BenchKnobs& k) { k.cpu_ready = {1e20}; },
       "--cpu-ready: 1e+20 is not a percentage in [0, 100)"},
      {[](BenchKnobs& k) {
         k.cpu_ready = {1, 5}, k.ready_stall = {"1ms", "2ms", "3ms"};
       },
       "--ready-stall: give one stall length, or one per --cpu-ready value (2)"},
      {[](BenchKnobs& k) { k.cpu_ready = {5}, k.ready_stall = {"exp:"}; }, "--ready-stall: 'exp:'"},
      {[](BenchKnobs& k) { k.cpu_ready = {5}, k.task_cpu = "1ms", k.task_cpu_mode = "nap"; },
       "--task-cpu-mode: 'nap' is neither burn nor sleep"},
      {[](BenchKnobs& k) { k.cpu_ready = {5}, k.task_cpu_mode = "sleep"; },
       "--task-cpu-mode: sleep needs --task-cpu"},
      {[](BenchKnobs& k) { k.exchange = true; }, "--exchange: needs --qd 1"},
      {[&](BenchKnobs& k) { k.dir = dir.File("missing"); }, "is not a writable directory"},
  };
  for (const auto& [change, message] : cases) {
    BenchKnobs k;
    change(k);
    const std::string refusal = Refusal(k);
    EXPECT_NE(refusal.find(message), std::string::npos)
        << "expected '" << message << "', got '" << refusal << "'";
  }
}

TEST(BenchKnobs, TheDefaultsAreTheDefaultMatrixWithRoundsAuto) {
  auto o = PlanBench(BenchKnobs{});
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_TRUE(o->auto_rounds);
  EXPECT_DOUBLE_EQ(o->precision, 0.02);
  EXPECT_DOUBLE_EQ(o->max_time_s, 120);
  EXPECT_EQ(o->knobs.block_size, 8192u);
  EXPECT_EQ(o->knobs.write_pct, 50u);
  EXPECT_DOUBLE_EQ(o->knobs.duration_s, 2.0);
  EXPECT_DOUBLE_EQ(o->knobs.warmup_s, 0.5);
  EXPECT_EQ(o->knobs.target_size, 256u << 20);
  std::vector<std::string> names, expected;
  for (const StackPlan& p : o->stacks) names.push_back(p.name);
  for (const StackPlan& p : DefaultMatrix(BackendChoice{})) expected.push_back(p.name);
  EXPECT_EQ(names, expected);
  EXPECT_EQ(o->anchors.size(), 0u);  // the run step's

  // Custom stacks default to 3 rounds; bare seconds and minutes are times.
  BenchKnobs k;
  k.stacks = {"memory:16M", "passthrough+memory:16M"};
  k.size = "8M";
  k.duration = "1.5";
  k.warmup = "0";
  k.cpu_ready = {1.2, 5.1};
  k.ready_stall = {"exp:1ms", "exp:2ms"};
  o = PlanBench(k);
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_FALSE(o->auto_rounds);
  EXPECT_EQ(o->rounds, 3);
  EXPECT_DOUBLE_EQ(o->knobs.duration_s, 1.5);
  EXPECT_EQ(o->knobs.quantum_ns, 4'000'000u);  // SQLOS's, with --cpu-ready
  ASSERT_EQ(o->stacks.size(), 4u);  // the sweep: every stack once per RDY%
  EXPECT_EQ(o->stacks[0].name, "memory:16M RDY 1.2%");
  EXPECT_EQ(o->stacks[3].ready_stall, "exp:2ms");

  // The same stack twice (an A/A check) gets two names: rows and ratios read "memory:16M"
  // against the baseline "memory:16M" before.
  BenchKnobs twice;
  twice.stacks = {"memory:16M", "memory:16M", "passthrough+memory:16M", "memory:16M"};
  twice.size = "8M";
  auto aa = PlanBench(twice);
  ASSERT_TRUE(aa) << aa.error().message;
  std::vector<std::string> aa_names;
  for (const StackPlan& p : aa->stacks) aa_names.push_back(p.name);
  EXPECT_EQ(aa_names, (std::vector<std::string>{"memory:16M", "memory:16M #2",
                                                "passthrough+memory:16M", "memory:16M #3"}));
  EXPECT_EQ(aa->stacks[1].spec, "memory:16M");

  // Every --content choice the command line offers plans (pattern: diskspd's buffer).
  for (const std::string& content : ContentNames()) {
    k.content = content;
    o = PlanBench(k);
    ASSERT_TRUE(o) << content << ": " << o.error().message;
    EXPECT_EQ(ContentName(o->knobs.content), content);
  }
}

TEST(BenchKnobs, APathRunsAsTheSpecItsProbeGivesAndSaysSo) {
  TempDir dir;
  const std::string image = dir.File("disk.raw");
  testing::WriteFile(image, 4 << 20, 0);
  BenchKnobs k;
  k.stacks = {image};
  k.size = "4M";
  k.write_pct = 0;
  std::vector<std::string> notes;
  auto o = PlanBench(k, &notes);
  ASSERT_TRUE(o) << o.error().message;
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "--stack " + image + " runs the stack file:" + image);
  ASSERT_EQ(o->stacks.size(), 1u);
  EXPECT_TRUE(o->stacks[0].read_only) << "a user's image that is only read opens read-only";

  // The note is said even when a later check refuses the run: here the workload would write.
  k.write_pct = 50;
  notes.clear();
  auto refused = PlanBench(k, &notes);
  ASSERT_FALSE(refused);
  EXPECT_EQ(notes.size(), 1u);
  EXPECT_NE(refused.error().message.find("which it did not create (50% of the requests write)"),
            std::string::npos)
      << refused.error().message;

  k.stacks = {dir.File("missing.raw")};
  refused = PlanBench(k);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find(",create=on,size=1G"), std::string::npos)
      << refused.error().message;

  // A bare file name in the working directory, as diskspd names its target: the file (it was
  // refused as a spec with an invalid name).
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  k.stacks = {"disk.raw"};
  k.write_pct = 0;
  notes.clear();
  auto bare = PlanBench(k, &notes);
  std::filesystem::current_path(cwd);
  ASSERT_TRUE(bare) << bare.error().message;
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "--stack disk.raw runs the stack file:disk.raw");
}

TEST(WriteGuard, AUserNamedDeviceIsReadOnlyRefusedOrTheRunsOwn) {
  TempDir dir;
  const std::string image = dir.File("victim.raw");
  testing::WriteFile(image, 1 << 20, 0x5a);
  auto plan = [](const std::string& spec) {
    StackPlan p;
    p.name = p.spec = spec;
    return p;
  };
  StackPlan p = plan("file:" + image);
  EXPECT_OK(GuardWrites({0, Prepare::kAuto, false}, &p));
  EXPECT_TRUE(p.read_only);

  p = plan("vhd+file:" + image);
  Status st = GuardWrites({0, Prepare::kFill, false}, &p);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("(--prepare fill writes all of it)"), std::string::npos);
  EXPECT_NE(st.error().message.find("the benchmark would write into '" + image + "'"),
            std::string::npos)
      << st.error().message;

  p = plan("file:" + image);
  EXPECT_OK(GuardWrites({100, Prepare::kAuto, true}, &p));  // --allow-write: the user's risk
  EXPECT_FALSE(p.read_only);

  // The run's own devices: memory, null, {dir}, and a file create=on makes (any true spelling
  // of it: create=yes was refused as "a file it did not create").
  const std::vector<std::string> own = {"memory:1M",
                                        "null:1M",
                                        "file:{dir}/x.img,create=on,size=1M",
                                        "file:" + dir.File("new.img") + ",create=on,size=1M",
                                        "file:" + dir.File("new.img") + ",create=yes,size=1M",
                                        "uring:" + dir.File("new.img") + ",create=true,size=1M",
                                        "file:" + dir.File("new.img") + ",create=1,size=1M"};
  for (const std::string& spec : own) {
    p = plan(spec);
    EXPECT_OK(GuardWrites({100, Prepare::kFresh, false}, &p)) << spec;
    EXPECT_FALSE(p.read_only) << spec;
  }
  p = plan("file:" + image + ",create=on,size=1M");  // create=on, but the file is there already
  EXPECT_FALSE(GuardWrites({100, Prepare::kAuto, false}, &p));
  for (const char* no : {"off", "no", "0", "maybe"}) {  // no create asked: not the run's own
    p = plan("file:" + dir.File("none.img") + ",create=" + no + ",size=1M");
    EXPECT_FALSE(GuardWrites({100, Prepare::kAuto, false}, &p)) << no;
  }
  // "{dir}" in the text is not enough: a path that climbs out of the scratch folder names the
  // user's file (it was written, without --allow-write).
  for (const char* escape : {"file:{dir}/../victim.raw", "file:{dir}/a/../../v.raw",
                            "uring:{dir}/..", "passthrough+file:/x/{dir}/y.raw"}) {
    p = plan(escape);
    EXPECT_FALSE(GuardWrites({50, Prepare::kAuto, false}, &p)) << escape;
    p = plan(escape);
    EXPECT_OK(GuardWrites({0, Prepare::kAuto, false}, &p)) << escape;
    EXPECT_TRUE(p.read_only) << escape;
  }
  p = plan("file:{dir}/..x/y..z.img,create=on,size=1M");  // names with dots stay inside
  EXPECT_OK(GuardWrites({100, Prepare::kAuto, false}, &p));
}

}  // namespace
}  // namespace vstack::bench
