// vstack bench's run step and its library outputs (bench/report/bench_run.h, records.h,
// bench/workload/cpu_ready_sweep.h): a run planned and run through the library gives the JSON
// the command line gives (the same keys everywhere), flat records that carry the per-round
// ratios the summary's intervals are made from, the CLI's stderr messages and its exit status.
#include "bench/report/bench_run.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

#include "bench/report/bench.h"
#include "bench/report/records.h"
#include "bench/report/report.h"
#include "bench/workload/cpu_ready_sweep.h"
#include "tests/testing/test_util.h"

namespace vstack::bench {
namespace {

using nlohmann::json;

BenchKnobs SmallRun() {
  BenchKnobs k;
  k.stacks = {"memory:16M", "passthrough+memory:16M"};
  k.size = "8M";
  k.bs = "4K";
  k.threads = 1;
  k.qd = 2;
  k.duration = "100ms";
  k.warmup = "0";
  k.rounds = "2";
  return k;
}

BenchReport RunThroughTheLibrary(const BenchKnobs& k) {
  auto planned = PlanBench(k);
  EXPECT_TRUE(planned) << planned.error().message;
  BenchRunHooks hooks;
  hooks.command = "library";
  int calls = 0;
  hooks.on_progress = [&](const MatrixProgress&) { ++calls; };
  BenchReport r = RunBench(std::move(*planned), k, hooks);
  EXPECT_GT(calls, 0) << "the progress callback was never called";
  return r;
}

// Every key path of `j`, arrays by their first element ("stacks[].rounds[].metrics.iops").
void KeyPaths(const json& j, const std::string& at, std::set<std::string>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      out->insert(at + "." + it.key());
      KeyPaths(it.value(), at + "." + it.key(), out);
    }
  } else if (j.is_array() && !j.empty()) {
    KeyPaths(j.front(), at + "[]", out);
  }
}

TEST(BenchRun, BenchmarksJsonHasTheCommandLinesKeysAndNumbers) {
  BenchRunHooks hooks;
  hooks.command = "library";
  int calls = 0;
  hooks.on_progress = [&](const MatrixProgress&) { ++calls; };
  auto run = Benchmark(SmallRun(), hooks);  // the public call (bench/report/bench.h)
  ASSERT_TRUE(run) << run.error().message;
  EXPECT_GT(calls, 0) << "the progress callback was never called";
  EXPECT_EQ(run->outcome, BenchOutcome::kOk);
  EXPECT_TRUE(run->messages.empty());
  const json lib = json::parse(run->json);
  // The document is the report's: the same numbers the text shows.
  EXPECT_EQ(lib, RenderJson(run->report));
  EXPECT_EQ(run->text, RenderText(run->report));
  testing::CommandResult cli = testing::RunVstack(
      "bench --stack memory:16M --stack passthrough+memory:16M --size 8M --bs 4K --threads 1 "
      "--qd 2 --duration 100ms --warmup 0 --rounds 2 --quiet --output=json 2>/dev/null");
  ASSERT_EQ(cli.status, 0) << cli.output;
  const json from_cli = json::parse(cli.output);
  std::set<std::string> a, b;
  KeyPaths(lib, "", &a);
  KeyPaths(from_cli, "", &b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(lib["knobs"], from_cli["knobs"]);
  EXPECT_EQ(lib["rounds_done"], from_cli["rounds_done"]);
  EXPECT_EQ(lib["stacks"][1]["chain"], from_cli["stacks"][1]["chain"]);
  EXPECT_EQ(lib["command"], "library");
}

TEST(BenchRun, RecordsCarryEachRoundAndItsRatioToTheBaselinesRound) {
  const BenchReport r = RunThroughTheLibrary(SmallRun());
  const json records = json::parse(BenchRecords(r));
  ASSERT_EQ(records.size(), 4u);  // 2 stacks x 2 rounds
  const json full = RenderJson(r);
  for (size_t i = 0; i < records.size(); ++i) {
    const json& rec = records[i];
    const json& round = full["stacks"][i / 2]["rounds"][i % 2];
    EXPECT_EQ(rec["stack"], full["stacks"][i / 2]["name"]);
    EXPECT_EQ(rec["round"], round["round"]);
    EXPECT_EQ(rec["iops"], round["metrics"]["iops"]);
    EXPECT_EQ(rec["p99_us"], round["metrics"]["latency_us"]["p99"]);
    EXPECT_EQ(rec["cpu_us_per_io"], round["metrics"]["cpu_us_per_io"]);
    EXPECT_TRUE(rec["measured"]);
  }
  EXPECT_TRUE(records[0]["baseline"]);
  EXPECT_DOUBLE_EQ(records[0]["iops_vs_base"].get<double>(), 1.0);
  for (int round : {0, 1}) {
    const double ratio = records[2 + round]["iops_vs_base"].get<double>();
    EXPECT_NEAR(ratio,
                records[2 + round]["iops"].get<double>() / records[round]["iops"].get<double>(),
                1e-12);
  }
  // The geometric mean of the per-round ratios is the summary's estimate.
  const double geo = std::sqrt(records[2]["iops_vs_base"].get<double>() *
                               records[3]["iops_vs_base"].get<double>());
  EXPECT_NEAR(geo, r.summary.stacks[1].iops_ratio.estimate, 1e-9);
}

TEST(BenchRun, AFailedStackAndAnInterruptedRunEndAsTheCommandLineDoes) {
  BenchKnobs k = SmallRun();
  k.stacks = {"memory:16M", "error:ops=write+memory:16M"};  // every write fails
  k.rounds = "1";
  BenchReport r = RunThroughTheLibrary(k);
  EXPECT_EQ(Outcome(r), BenchOutcome::kFailed);
  const auto messages = BenchMessages(r);
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages[0].rfind("error:ops=write+memory:16M: ", 0), 0u) << messages[0];

  std::atomic<bool> stop{true};  // stopped before it starts
  auto planned = PlanBench(SmallRun());
  ASSERT_TRUE(planned);
  BenchRunHooks hooks;
  hooks.stop = &stop;
  EXPECT_EQ(Outcome(RunBench(std::move(*planned), SmallRun(), hooks)), BenchOutcome::kInterrupted);
  auto stopped = Benchmark(SmallRun(), hooks);
  ASSERT_TRUE(stopped);
  EXPECT_EQ(stopped->outcome, BenchOutcome::kInterrupted);
}

TEST(BenchRun, BenchmarkRefusesBadKnobsWithTheCommandLinesWordsAndTellsItsNotes) {
  BenchKnobs k = SmallRun();
  k.bs = "1000";
  std::vector<std::string> notes;
  BenchRunHooks hooks;
  hooks.on_note = [&](const std::string& n) { notes.push_back(n); };
  auto run = Benchmark(k, hooks);
  ASSERT_FALSE(run);
  EXPECT_EQ(run.error().code, make_error_code(Errc::kInvalidArgument));
  EXPECT_EQ(run.error().message, "--bs: 1000 is not a positive multiple of 512");
  // A --stack naming an image file runs as its probed spec, said as a note before the write
  // guard refuses writing into it.
  testing::TempDir dir;
  const std::string image = dir.File("d.img");
  testing::WriteFile(image, 16 << 20, 0);
  k = SmallRun();
  k.stacks = {image};
  auto refused = Benchmark(k, hooks);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("--allow-write"), std::string::npos)
      << refused.error().message;
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("--stack " + image + " runs the stack"), std::string::npos) << notes[0];
}

TEST(CpuReadySweep, TheMedianWindowCountsTheRoundsThatDidIo) {
  MatrixResult m;
  StackOutcome o;
  o.plan.name = "s";
  for (double seconds : {2.0, 2.4, 3.0}) {
    RunResult run;
    run.seconds = seconds;
    if (seconds < 3) run.threads.resize(1), run.threads[0].read.ios = 10;  // 3.0 did no I/O
    o.rounds.push_back(run);
  }
  m.stacks.push_back(o);
  EXPECT_DOUBLE_EQ(MedianWindowSeconds(m, "s"), 2.2);  // an even count: the mean of the middle two
  EXPECT_EQ(MedianWindowSeconds(m, "other"), 0);
  MatrixSummary s;
  s.stacks.resize(1);
  s.stacks[0].runs = 2;
  EXPECT_TRUE(SchedulerRows(m, s).empty()) << "no quantum scheduler, no CPU Ready rows";
  m.knobs.quantum_ns = 4'000'000;
  EXPECT_EQ(SchedulerRows(m, s).size(), 1u);
  EXPECT_TRUE(CpuReadyGrowthRows(m, s).empty()) << "one row is no sweep";
}

}  // namespace
}  // namespace vstack::bench
