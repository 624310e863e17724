// The matrix: interleaved rounds, presets on temporary files (filled once or fresh every
// round), skipped stacks, the scratch directory always removed, medians and ratios, and the
// per-layer attribution arithmetic.
#include "bench/workload/matrix.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "bench/workload/attribution.h"
#include "bench/workload/summary.h"
#include "tests/testing/test_util.h"

namespace vstack::bench {
namespace {

WorkloadKnobs Tiny() {
  WorkloadKnobs k;
  k.block_size = 4096;
  k.threads = 2;
  k.queue_depth = 4;
  k.duration_s = 0.15;
  k.warmup_s = 0.05;
  k.target_size = 8 << 20;
  return k;
}

size_t Entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

TEST(Matrix, RoundsAreInterleavedAndTheScratchDirectoryIsRemoved) {
  testing::TempDir dir;
  MatrixOptions o;
  o.knobs = Tiny();
  o.rounds = 2;
  o.scratch_parent = dir.path();
  BackendChoice file{"file", false};
  for (const char* s : {"raw", "passthrough", "raw-fresh"}) {
    auto p = ResolveStack(s, file);
    ASSERT_OK(p);
    o.stacks.push_back(*p);
  }
  auto nosuch = ResolveStack("memory:8M", file);
  ASSERT_OK(nosuch);
  nosuch->name = "needs-nosuch";
  nosuch->components.push_back("nosuch");
  o.stacks.push_back(*nosuch);
  std::vector<std::string> order;
  bool saw_fill = false;
  o.on_progress = [&](const MatrixProgress& p) {
    if (p.activity == "preparing") order.push_back(p.stack);
    if (p.activity == "filling") saw_fill = true;
  };
  const MatrixResult m = RunMatrix(o);
  EXPECT_TRUE(m.error.empty()) << m.error;
  EXPECT_EQ(m.rounds_done, 2);
  EXPECT_FALSE(m.interrupted);
  EXPECT_TRUE(saw_fill);
  EXPECT_EQ(order, (std::vector<std::string>{"raw", "passthrough", "raw-fresh", "raw", "passthrough",
                                             "raw-fresh"}));
  ASSERT_EQ(m.stacks.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(m.stacks[i].error.empty()) << m.stacks[i].error;
    ASSERT_EQ(m.stacks[i].rounds.size(), 2u) << m.stacks[i].plan.name;
    EXPECT_EQ(m.stacks[i].rounds[1].round, 1);
    EXPECT_EQ(m.stacks[i].rounds[1].knobs.seed, o.knobs.seed + 1);
    EXPECT_GT(m.stacks[i].rounds[0].Total().ios, 0u);
  }
  EXPECT_EQ(m.stacks[0].chain.size(), 1u);
  EXPECT_EQ(m.stacks[1].chain.size(), 2u);
  EXPECT_EQ(m.stacks[2].rounds[0].knobs.warmup_s, 0.0);  // fresh: first writes are measured
  EXPECT_NE(m.stacks[3].skipped.find("'nosuch'"), std::string::npos) << m.stacks[3].skipped;
  EXPECT_TRUE(m.stacks[3].rounds.empty());
  EXPECT_FALSE(m.scratch_dir.empty());
  EXPECT_FALSE(std::filesystem::exists(m.scratch_dir));
  EXPECT_EQ(Entries(dir.path()), 0u);

  const MatrixSummary s = Summarize(m);
  EXPECT_EQ(s.baseline, "raw");
  ASSERT_EQ(s.stacks.size(), 4u);
  EXPECT_TRUE(s.stacks[0].baseline);
  EXPECT_DOUBLE_EQ(s.stacks[0].iops_vs_base.median, 1.0);
  EXPECT_EQ(s.stacks[0].gap, "the baseline");
  EXPECT_EQ(s.stacks[1].runs, 2);
  EXPECT_GT(s.stacks[1].iops_vs_base.median, 0.0);
  EXPECT_NE(s.stacks[1].gap.find("IOPS "), std::string::npos) << s.stacks[1].gap;
  EXPECT_NE(s.stacks[1].gap.find("CPU per I/O "), std::string::npos) << s.stacks[1].gap;
  EXPECT_EQ(s.stacks[3].runs, 0);
}

// An anchor that records when it ran and which vstack run it was sized by.
class RecordingAnchor : public Anchor {
 public:
  explicit RecordingAnchor(std::vector<std::string>& events) : events_(events) {}
  std::string name() const override { return "recorder"; }
  bool AppliesTo(const StackPlan& plan) const override { return plan.name == "raw"; }
  Result<AnchorResult> Run(const AnchorJob& job) override {
    events_.push_back("anchor sized by round " + std::to_string(job.vstack->round));
    ready_seen.push_back(job.knobs.cpu_ready_pct);
    AnchorResult r;
    r.ios = 1000;
    r.seconds = 1;
    r.iops = 1000;
    return r;
  }
  std::vector<double> ready_seen;  // the --cpu-ready each run was given

 private:
  std::vector<std::string>& events_;
};

TEST(Matrix, AnchorsGoAfterTheStackInEvenRoundsAndBeforeItInOddOnes) {
  testing::TempDir dir;
  MatrixOptions o;
  o.knobs = Tiny();
  o.rounds = 4;
  o.scratch_parent = dir.path();
  auto raw = ResolveStack("raw", BackendChoice{"file", false});
  ASSERT_OK(raw);
  o.knobs.quantum_ns = 4'000'000;
  raw->cpu_ready_pct = 2.5;  // a sweep's plan: its anchors get its knobs in either order
  o.stacks.push_back(*raw);
  std::vector<std::string> events;
  RecordingAnchor anchor(events);
  o.anchors.push_back(&anchor);
  o.on_progress = [&](const MatrixProgress& p) {
    if (p.activity == "preparing") events.push_back("vstack round " + std::to_string(p.round));
  };
  const MatrixResult m = RunMatrix(o);
  ASSERT_TRUE(m.error.empty()) << m.error;
  EXPECT_EQ(events, (std::vector<std::string>{
                        "vstack round 0", "anchor sized by round 0",  //
                        "anchor sized by round 0", "vstack round 1",  //
                        "vstack round 2", "anchor sized by round 2",  //
                        "anchor sized by round 2", "vstack round 3"}));
  // Each anchor run is still paired with vstack's run of its own round.
  ASSERT_EQ(m.stacks[0].anchors.size(), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(m.stacks[0].anchors[r].round, r);
  EXPECT_EQ(anchor.ready_seen, (std::vector<double>{2.5, 2.5, 2.5, 2.5}));
  const MatrixSummary s = Summarize(m);
  ASSERT_EQ(s.stacks[0].anchors.size(), 1u);
  EXPECT_EQ(s.stacks[0].anchors[0].runs, 4);
}

// An anchor beside every stack that records the warm-up it was given, per stack, in order.
class RampAnchor : public Anchor {
 public:
  std::string name() const override { return "ramp"; }
  bool AppliesTo(const StackPlan&) const override { return true; }
  Result<AnchorResult> Run(const AnchorJob& job) override {
    warmups[job.plan->name].push_back(job.knobs.warmup_s);
    AnchorResult r;
    r.ios = r.iops = 1000;
    r.seconds = 1;
    return r;
  }
  std::map<std::string, std::vector<double>> warmups;
};

TEST(Matrix, BothSidesOfARoundRunTheWarmUpThePlansPreparationCallsFor) {
  testing::TempDir dir;
  MatrixOptions o;
  o.knobs = Tiny();
  o.rounds = 4;  // rounds 1 and 3 put the anchors first
  o.scratch_parent = dir.path();
  const BackendChoice file{"file", false};
  for (const char* name : {"raw", "raw-fresh"}) {
    auto plan = ResolveStack(name, file);
    ASSERT_OK(plan);
    o.stacks.push_back(*plan);
  }
  RampAnchor anchor;
  o.anchors.push_back(&anchor);
  const MatrixResult m = RunMatrix(o);
  ASSERT_TRUE(m.error.empty()) << m.error;
  for (const StackOutcome& s : m.stacks) {
    ASSERT_EQ(s.rounds.size(), 4u) << s.plan.name << ": " << s.error;
    // A filled image warms up; a fresh one is measured from its first write, on both sides.
    const double want = s.plan.prepare == Prepare::kFresh ? 0 : o.knobs.warmup_s;
    for (const RunResult& r : s.rounds) EXPECT_EQ(r.knobs.warmup_s, want) << s.plan.name;
    EXPECT_EQ(anchor.warmups[s.plan.name], std::vector<double>(4, want)) << s.plan.name;
  }
}

TEST(Matrix, AnInvalidStackIsAClearErrorAndPresetsKnowTheirFiles) {
  BackendChoice b;
  auto bad = ResolveStack("nosuchpreset", b);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("neither a named stack"), std::string::npos) << bad.error().message;
  auto badlayer = ResolveStack("nosuch+memory:1M", b);
  ASSERT_FALSE(badlayer);
  EXPECT_NE(badlayer.error().message.find("unknown layer 'nosuch'"), std::string::npos);
  auto fixed = ResolveStack("vhd-fixed", b);
  ASSERT_OK(fixed);
  EXPECT_EQ(fixed->spec, "vhd+uring:{dir}/fixed.vhd,direct=on");
  EXPECT_EQ(fixed->qemu_format, "vpc");
  EXPECT_EQ(fixed->image_options, "subformat=fixed");
  auto raw = ResolveStack("uring:/x/y.img", b);
  ASSERT_OK(raw);
  EXPECT_TRUE(raw->raw_file);
  EXPECT_EQ(BackendFile(raw->spec), "/x/y.img");
  const std::vector<StackPlan> def = DefaultMatrix(b);
  std::vector<std::string> names;
  for (const StackPlan& p : def) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"raw", "passthrough", "vhd-fixed", "vhd-dynamic",
                                             "vhd-dynamic-fresh", "dedup", "zstd", "dedup+zstd"}));
}

TEST(Matrix, SpecsExpandTheScratchDirectoryAndSizesRelativeToTheTarget) {
  EXPECT_EQ(ExpandSpec("dedup+zstd:size={size:1.25}+uring:{dir}/d.img", "/tmp/x", 256ull << 20),
            "dedup+zstd:size=" + std::to_string(320ull << 20) + "+uring:/tmp/x/d.img");
  EXPECT_EQ(ExpandSpec("zstd:size={size:0.3}+memory:1G", "/d", 10ull << 20),
            "zstd:size=" + std::to_string(3ull << 20) + "+memory:1G");  // rounded down to a MiB
  // The presets format the scratch file they create (format=on on the lowest layer). dedup over
  // zstd needs no sizing of zstd: dedup reuses and discards the grains it frees (issue 11).
  auto plan = ResolveStack("dedup+zstd", BackendChoice{});
  ASSERT_TRUE(plan.has_value());
  EXPECT_NE(plan->spec.find("dedup+zstd:format=on+"), std::string::npos) << plan->spec;
}

// The Ceph named stacks run on the images tools/ceph-up creates, and only on request.
TEST(Matrix, CephPresetsUseTheCephUpImages) {
  auto rep = ResolveStack("rbd-replicated", BackendChoice{});
  ASSERT_OK(rep);
  EXPECT_EQ(rep->spec, "rbd:rbd/bench-rep");
  auto ec = ResolveStack("rbd-ec", BackendChoice{});
  ASSERT_OK(ec);
  EXPECT_EQ(ec->spec, "rbd:rbd/bench-ec");
  auto dz = ResolveStack("dedup+zstd-rbd-ec", BackendChoice{});
  ASSERT_OK(dz);
  EXPECT_EQ(dz->spec, "dedup+zstd:size={size:1.25},format=on+rbd:rbd/bench-ec-dz");
  EXPECT_EQ(dz->prepare, Prepare::kFill);
  EXPECT_TRUE(MissingComponents(*dz).empty());
}

TEST(Matrix, StoppedInAFillTheStackSaysItWasInterrupted) {
  // The JSON said "interrupted": false for a stack stopped in its fill (only its error said).
  testing::TempDir dir;
  MatrixOptions o;
  o.knobs = Tiny();
  o.rounds = 2;
  o.scratch_parent = dir.path();
  o.stacks.push_back(*ResolveStack("raw", BackendChoice{"file", false}));
  std::atomic<bool> stop{false};
  o.stop = &stop;
  o.on_progress = [&](const MatrixProgress& p) {
    if (p.activity == "filling") stop.store(true);
  };
  const MatrixResult m = RunMatrix(o);
  ASSERT_EQ(m.stacks.size(), 1u);
  EXPECT_TRUE(m.stacks[0].interrupted);
  EXPECT_NE(m.stacks[0].error.find("interrupted while filling"), std::string::npos)
      << m.stacks[0].error;
  EXPECT_TRUE(Summarize(m).stacks[0].interrupted);
  EXPECT_EQ(Entries(dir.path()), 0u);
}

TEST(Matrix, StopFlagEndsEverythingAndStillCleansUp) {
  testing::TempDir dir;
  MatrixOptions o;
  o.knobs = Tiny();
  o.knobs.duration_s = 30;
  o.rounds = 3;
  o.scratch_parent = dir.path();
  for (const char* s : {"raw", "passthrough"}) o.stacks.push_back(*ResolveStack(s, BackendChoice{"file", false}));
  std::atomic<bool> stop{false};
  o.stop = &stop;
  o.on_progress = [&](const MatrixProgress& p) {
    if (p.activity == "running" && p.run.elapsed_s > 0.2) stop.store(true);
  };
  const MatrixResult m = RunMatrix(o);
  EXPECT_TRUE(m.interrupted);
  EXPECT_EQ(m.rounds_done, 0);
  ASSERT_EQ(m.stacks[0].rounds.size(), 1u);
  EXPECT_TRUE(m.stacks[0].rounds[0].interrupted);
  EXPECT_TRUE(m.stacks[1].rounds.empty());
  EXPECT_EQ(Entries(dir.path()), 0u);
  EXPECT_TRUE(Summarize(m).stacks[0].interrupted);
}

// A run with `ios` I/Os in one second and `cpu` seconds of process CPU.
RunResult Synthetic(int round, uint64_t ios, double cpu) {
  RunResult r;
  r.round = round;
  r.seconds = 1.0;
  r.threads.resize(1);
  r.threads[0].read.ios = ios;
  r.threads[0].read.bytes = ios * 4096;
  for (uint64_t i = 0; i < 10; ++i) r.threads[0].read.latency.Record(1000 * (i + 1));
  r.cpu.wall_s = 1.0;
  r.cpu.process_user_s = cpu;
  r.cpu.cpus.resize(2);
  return r;
}

TEST(Summary, MediansRatiosWithinRoundsAndTheWhitepaperOverhead) {
  MatrixResult m;
  m.rounds_planned = m.rounds_done = 3;
  StackOutcome base, other;
  base.plan.name = "base";
  other.plan.name = "other";
  // The machine drifts: round 1 is slow for everyone. Ratios are taken within each round.
  base.rounds = {Synthetic(0, 1000, 0.5), Synthetic(1, 500, 0.25), Synthetic(2, 1100, 0.55)};
  other.rounds = {Synthetic(0, 900, 0.5), Synthetic(1, 450, 0.25), Synthetic(2, 990, 0.55)};
  m.stacks = {base, other};
  const MatrixSummary s = Summarize(m);
  ASSERT_EQ(s.stacks.size(), 2u);
  EXPECT_DOUBLE_EQ(s.stacks[0].iops.median, 1000);
  EXPECT_DOUBLE_EQ(s.stacks[0].iops.min, 500);
  EXPECT_DOUBLE_EQ(s.stacks[0].iops.max, 1100);
  EXPECT_NEAR(s.stacks[1].iops_vs_base.median, 0.9, 1e-12);
  EXPECT_NEAR(s.stacks[1].iops_vs_base.min, 0.9, 1e-12);
  EXPECT_DOUBLE_EQ(s.stacks[0].iops_per_cpu_s, 2000);
  EXPECT_DOUBLE_EQ(s.stacks[1].iops_per_cpu_s, 1800);
  EXPECT_NEAR(s.stacks[1].overhead_vs_base, 0.1, 1e-12);  // (2000 - 1800) / 2000
  EXPECT_DOUBLE_EQ(s.stacks[0].process_cpu_pct, 25.0);    // 0.5 s of 2 CPUs x 1 s
  EXPECT_DOUBLE_EQ(s.stacks[0].iops_per_cpu_pct, 40.0);   // the whitepaper's IOPS per %CPU
  EXPECT_DOUBLE_EQ(s.stacks[0].cpu_us_per_io, 500.0);
  EXPECT_EQ(s.stacks[0].median_round, 0);
  EXPECT_EQ(s.stacks[0].latency.count(), 30u);
  const Spread even = SpreadOf({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(even.median, 2.5);
}

TEST(Summary, AnAAPairIsNotSignificantAndTheGapSaysSo) {
  // raw and an identical copy, in rounds that drift by 2x: every ratio is within noise.
  MatrixResult m;
  m.rounds_planned = m.rounds_done = 4;
  StackOutcome a, b, slow;
  a.plan.name = "raw";
  b.plan.name = "raw-copy";
  slow.plan.name = "slow";
  const double drift[] = {1.0, 0.5, 1.2, 0.8};
  const double noise_a[] = {1.01, 0.99, 1.0, 1.02}, noise_b[] = {0.99, 1.01, 1.02, 0.99};
  for (int r = 0; r < 4; ++r) {
    a.rounds.push_back(Synthetic(r, uint64_t(10000 * drift[r] * noise_a[r]), 0.5 * drift[r]));
    b.rounds.push_back(Synthetic(r, uint64_t(10000 * drift[r] * noise_b[r]), 0.5 * drift[r]));
    slow.rounds.push_back(Synthetic(r, uint64_t(7000 * drift[r] * noise_b[r]), 0.5 * drift[r]));
  }
  m.stacks = {a, b, slow};
  const MatrixSummary s = Summarize(m);
  ASSERT_EQ(s.stacks.size(), 3u);
  const StackSummary& copy = s.stacks[1];
  EXPECT_FALSE(copy.iops_ratio.significant);
  EXPECT_LT(copy.iops_ratio.low, 1);
  EXPECT_GT(copy.iops_ratio.high, 1);
  EXPECT_FALSE(copy.efficiency_ratio.significant);
  EXPECT_NE(copy.gap.find("no significant difference from raw"), std::string::npos) << copy.gap;
  EXPECT_NE(copy.gap.find("no significant efficiency overhead"), std::string::npos) << copy.gap;
  EXPECT_EQ(copy.gap.find("efficiency overhead -"), std::string::npos) << copy.gap;
  // A 30% loss with the same drift is found, with an interval around 0.7.
  const StackSummary& sl = s.stacks[2];
  EXPECT_TRUE(sl.iops_ratio.significant);
  EXPECT_NEAR(sl.iops_ratio.estimate, 0.7, 0.02);
  EXPECT_TRUE(sl.efficiency_ratio.significant);
  EXPECT_EQ(sl.gap.find("no significant difference"), std::string::npos) << sl.gap;
  // The precision reached is the widest IOPS half-width of the non-baseline stacks.
  EXPECT_DOUBLE_EQ(s.precision_reached, std::max(copy.iops_ratio.relative_half_width(),
                                                 sl.iops_ratio.relative_half_width()));
  EXPECT_TRUE(PrecisionReached(s, 1.0));
  EXPECT_FALSE(PrecisionReached(s, 0.001));
}

TEST(Summary, AStackWhoseRoundsCompletedNothingSaysWhy) {
  // It read "not run" with no reason, though its rounds ran (one 64 MiB I/O in a 0.1 s window).
  MatrixResult m;
  StackOutcome a;
  a.plan.name = "memory:64M";
  for (int r = 0; r < 2; ++r) a.rounds.push_back(Synthetic(r, 0, 0.1));
  m.stacks = {a};
  const MatrixSummary s = Summarize(m);
  ASSERT_EQ(s.stacks.size(), 1u);
  EXPECT_EQ(s.stacks[0].runs, 0);
  EXPECT_NE(s.stacks[0].error.find("no request completed within a round's measured window"),
            std::string::npos)
      << s.stacks[0].error;
  EXPECT_NE(s.stacks[0].error.find("give a longer --duration, or --ios"), std::string::npos);
}

TEST(Summary, TheBaselineAloneReachesAPrecisionOnlyWhenItsOwnRoundsAgree) {
  // With one stack there is no ratio: `--rounds auto` stopped at once, "the precision was
  // reached", whatever the rounds measured. Now its own IOPS interval is the precision.
  auto alone = [](std::vector<double> iops) {
    MatrixResult m;
    StackOutcome a;
    a.plan.name = "raw";
    for (int r = 0; r < static_cast<int>(iops.size()); ++r) {
      a.rounds.push_back(Synthetic(r, static_cast<uint64_t>(iops[r]), 0.5));
    }
    m.stacks = {a};
    return Summarize(m);
  };
  EXPECT_TRUE(std::isinf(alone({10000}).precision_reached)) << "one round has no interval";
  const MatrixSummary drifting = alone({10000, 5000, 12000, 8000});
  EXPECT_FALSE(PrecisionReached(drifting, 0.02)) << drifting.precision_reached;
  EXPECT_GT(drifting.precision_reached, 0.2);
  const MatrixSummary steady = alone({10000, 10010, 9990, 10005});
  EXPECT_TRUE(PrecisionReached(steady, 0.02)) << steady.precision_reached;
  EXPECT_GT(steady.precision_reached, 0);
}

// A passthrough layer over a device, as one round measures it with one timestamp per batch:
// the layer hands each request on within its batch, so its self time is exactly 0 and all of
// the guest's latency is the device's.
std::vector<LayerDelta> ForwardedWithinTheBatch(uint64_t ios) {
  LayerDelta top, below;
  top.kind = "passthrough";
  below.kind = "memory";
  top.level = 1;
  top.ops[int(Op::kRead)] = below.ops[int(Op::kRead)] = ios;
  top.paths.requests = ios;
  top.paths.self_ns = {ios * 26000, 0};
  top.paths.total_ns = ios * 26000;
  return {top, below};
}

// A self time of 0 is below the resolution of one timestamp per batch, not a measured 0: the
// words, the flag and the summary say so, and point at CPU per I/O, where the layer's cost shows.
TEST(Attribution, ASelfTimeBelowTheTimestampResolutionIsSaidNotPrintedAsZero) {
  const Attribution a = Attribute(ForwardedWithinTheBatch(1000), 27.0);
  ASSERT_EQ(a.layers.size(), 2u);
  const LayerCost& pt = a.layers[0];
  EXPECT_FALSE(pt.self_resolved);
  EXPECT_FALSE(pt.self_median_resolved);
  EXPECT_TRUE(a.layers[1].self_resolved);  // the device's 26 us
  EXPECT_NE(pt.words.find("below the timestamp resolution"), std::string::npos) << pt.words;
  EXPECT_NE(pt.words.find("CPU per I/O"), std::string::npos) << pt.words;
  EXPECT_EQ(pt.words.find("0.00 us"), std::string::npos) << pt.words;
  EXPECT_EQ(pt.words.find("p50 0.00"), std::string::npos) << pt.words;

  // The stack's sentence, through the summary: a CPU cost of +10% per round against the base.
  MatrixResult m;
  m.rounds_planned = m.rounds_done = 3;
  StackOutcome base, layer;
  base.plan.name = "memory";
  layer.plan.name = "passthrough";
  const double cpu[] = {0.50, 0.45, 0.55}, extra[] = {1.09, 1.10, 1.11};
  for (int r = 0; r < 3; ++r) {
    base.rounds.push_back(Synthetic(r, 10000, cpu[r]));
    layer.rounds.push_back(Synthetic(r, 10000, cpu[r] * extra[r]));
    layer.rounds.back().layers = ForwardedWithinTheBatch(10000);
  }
  m.stacks = {base, layer};
  const std::string gap = Summarize(m).stacks[1].gap;
  EXPECT_EQ(gap.find("0.00 us"), std::string::npos) << gap;
  EXPECT_NE(gap.find("The self time of passthrough is below the timestamp resolution"),
            std::string::npos)
      << gap;
  EXPECT_NE(gap.find("its cost shows in CPU per I/O against memory: +10.0% (+"), std::string::npos)
      << gap;

  // A layer that does take time names the one below the resolution beside it.
  std::vector<LayerDelta> two = ForwardedWithinTheBatch(1000);
  LayerDelta upper = two[0];
  upper.kind = "dedup";
  upper.level = 2;
  upper.paths.self_ns = {1000 * 26000, 0, 1000 * 3000};
  upper.paths.total_ns = 1000 * 29000;
  two[0].paths = {};
  two.insert(two.begin(), upper);
  const Attribution b = Attribute(two, 29.0);
  const std::string sentence = AttributionSentence(b, RatioInterval{}, "memory");
  EXPECT_NE(sentence.find("most in dedup (3.00 us, p50 "), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("; passthrough: below the timestamp resolution"), std::string::npos)
      << sentence;
}

TEST(Attribution, RequestsBytesTimeAndCountersPerGuestIo) {
  LayerDelta top, below;
  top.kind = "fmt";
  below.kind = "dev";
  top.ops[int(Op::kRead)] = 500;
  top.ops[int(Op::kWrite)] = 500;
  top.bytes[int(Op::kRead)] = 500 * 8192;
  top.bytes[int(Op::kWrite)] = 500 * 8192;
  top.latency_sum_ns[int(Op::kRead)] = 500 * 12000;
  top.latency_sum_ns[int(Op::kWrite)] = 500 * 12000;
  below.ops[int(Op::kRead)] = 300;  // 200 reads served without I/O below
  below.ops[int(Op::kWrite)] = 520;
  below.ops[int(Op::kFlush)] = 20;
  below.bytes[int(Op::kRead)] = 300 * 8192;
  below.bytes[int(Op::kWrite)] = 250 * 8192;  // writes shrink to half below
  below.latency_sum_ns[int(Op::kRead)] = 300 * 10000;
  below.latency_sum_ns[int(Op::kWrite)] = 520 * 10000;
  top.counter_names = {"allocations", "unused"};
  top.counters = {10, 0};
  // Paths (lib/stats.h): the 1000 guest requests spent 4 us each in fmt, 8.2 in dev; the
  // 20 flushes fmt issued for itself ended at dev, 30 us each there.
  top.level = 1;
  top.paths.requests = 1000;
  top.paths.self_ns = {1000 * 8200, 1000 * 4000};
  top.paths.total_ns = 1000 * 12200;
  below.paths.requests = 20;
  below.paths.self_ns = {20 * 30000};
  below.paths.total_ns = 20 * 30000;
  const Attribution a = Attribute({top, below}, 12.0);
  ASSERT_EQ(a.layers.size(), 2u);
  EXPECT_EQ(a.guest_ios, 1000u);
  const LayerCost& f = a.layers[0];
  EXPECT_DOUBLE_EQ(f.in_total, 1.0);
  EXPECT_DOUBLE_EQ(f.out_total, 0.84);
  EXPECT_DOUBLE_EQ(f.out_per_io[int(Op::kFlush)], 0.02);
  EXPECT_DOUBLE_EQ(f.read_bytes_ratio, 0.6);
  EXPECT_DOUBLE_EQ(f.write_bytes_ratio, 0.5);
  EXPECT_TRUE(a.timed);
  EXPECT_DOUBLE_EQ(f.self_us_per_io, 4.0);
  EXPECT_DOUBLE_EQ(f.own_requests_per_io, 0.02);
  EXPECT_DOUBLE_EQ(f.own_us_per_io, 0.6);
  EXPECT_DOUBLE_EQ(f.own_device_us_per_io, 0.6);
  EXPECT_FALSE(f.own_overlaps);
  EXPECT_DOUBLE_EQ(a.sum_us, 12.2);
  EXPECT_DOUBLE_EQ(a.end_to_end_us, 12.2);
  EXPECT_NEAR(a.residual_pct, (12.2 - 12.0) / 12.0 * 100, 1e-9);
  ASSERT_EQ(f.counters.size(), 2u);  // every declared counter: the JSON's shape is fixed
  EXPECT_DOUBLE_EQ(f.counters[0].per_io, 0.01);
  EXPECT_EQ(f.counters[1].name, "unused");
  EXPECT_EQ(f.counters[1].total, 0u);
  EXPECT_EQ(f.words.find("unused"), std::string::npos) << f.words;  // the text: only what moved
  EXPECT_NE(f.words.find("served without I/O below"), std::string::npos) << f.words;
  EXPECT_NE(f.words.find("+0.020 flushes"), std::string::npos) << f.words;
  EXPECT_NE(f.words.find("write bytes below x0.50"), std::string::npos) << f.words;
  EXPECT_NE(f.words.find("allocations 10 (0.01/I/O)"), std::string::npos) << f.words;
  EXPECT_TRUE(a.layers[1].backend);
  EXPECT_DOUBLE_EQ(a.layers[1].self_us_per_io, 8.2);
  EXPECT_NE(f.words.find("0.02 requests and 0.60 us per guest I/O (device 0.60 us)"), std::string::npos) << f.words;
  // Own I/O taking longer than the layer's self time ran beside the guest's: said, not hidden.
  below.paths.total_ns = 20 * 300000;
  const LayerCost g = Attribute({top, below}).layers[0];
  EXPECT_TRUE(g.own_overlaps);
  EXPECT_NE(g.words.find("overlapped with guest I/O"), std::string::npos) << g.words;
}

}  // namespace
}  // namespace vstack::bench
