// The kvm-vs-hyperv seed: its preset parses into the source's workload and stacks that open,
// its calibration follows from the published numbers as docs/presets.md says, and its report
// prints the published and the measured columns side by side (from a short real run). The
// measured numbers themselves are benchmarks (docs/presets.md), not thresholds here.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <numeric>
#include <sstream>

#include "bench/report/report.h"
#include "bench/workload/foreign_args.h"
#include "bench/workload/kvm_hyperv.h"
#include "bench/workload/presets.h"
#include "blockdev/emulation/service_time.h"
#include "lib/registry.h"
#include "lib/spec.h"

namespace vstack::cli {
namespace {

using bench::BenchReport;
using bench::RenderPresetTables;
using bench::PresetTablesJson;

bench::Preset Preset(bench::WorkloadKnobs* k, bool duration_given) {
  auto p = bench::FindPreset("kvm-vs-hyperv");
  EXPECT_TRUE(p) << p.error().message;
  bench::ApplyPresetKnobs(&*p, k, duration_given);
  return *p;
}

// The option `key` of the spec part named `part`.
std::string Option(const std::string& spec, const std::string& part, const std::string& key) {
  const std::vector<SpecPart> parts = ParseSpec(spec).value();
  for (const SpecPart& p : parts) {
    for (const SpecOption& o : p.options) {
      if (p.name == part && o.key == key) return o.value;
    }
  }
  return "";
}

TEST(KvmHypervPreset, RunsTheSeedsDiskspdLineOnStacksThatOpen) {
  bench::WorkloadKnobs k;
  const bench::Preset p = Preset(&k, false);
  EXPECT_EQ(p.diskspd, "-b8K -d300 -h -L -o8 -t4 -r -w50 -c10G");
  // The knobs are the diskspd line's translation, but for the preset's shorter run.
  auto t = bench::TranslateDiskspd(p.diskspd);
  ASSERT_TRUE(t) << t.error().message;
  std::map<std::string, std::string> want;
  for (const bench::ForeignKnob& knob : t->knobs) want[knob.flag] = knob.value;
  EXPECT_EQ(want["--bs"], "8K");
  EXPECT_EQ(k.block_size, 8192u);
  EXPECT_EQ(want["--qd"], "8");
  EXPECT_EQ(k.queue_depth, 8u);
  EXPECT_EQ(want["--threads"], "4");
  EXPECT_EQ(k.threads, 4u);
  EXPECT_EQ(want["--write-pct"], "50");
  EXPECT_EQ(k.write_pct, 50u);
  EXPECT_EQ(want["--pattern"], "random");
  EXPECT_EQ(k.pattern, bench::AccessPattern::kRandom);
  EXPECT_EQ(want["--size"], "10G");
  EXPECT_EQ(k.target_size, 10ull << 30);
  EXPECT_EQ(want["--duration"], "300s");
  EXPECT_EQ(k.duration_s, bench::kKvmHypervDefaultSeconds);
  // What the line leaves out: diskspd's 5 s warm-up; the preset keeps vstack's, and says so.
  EXPECT_EQ(want["--warmup"], "5s");
  EXPECT_EQ(k.warmup_s, bench::WorkloadKnobs().warmup_s);
  EXPECT_NE(p.calibration.back().find("no -W (diskspd warms up 5 s)"), std::string::npos)
      << p.calibration.back();
  ASSERT_EQ(p.stacks.size(), 6u);
  EXPECT_EQ(p.stacks[0].name, "kvm-virtio");
  EXPECT_EQ(p.stacks[1].name, "hyperv-gen2");
  for (const bench::StackPlan& s : p.stacks) {
    auto dev = Open(s.spec);
    EXPECT_TRUE(dev) << s.spec << ": " << dev.error().message;
    EXPECT_EQ(s.duration_s > 0, s.name.find(' ') != std::string::npos)
        << s.name << ": only the predictions run shorter";
  }
  EXPECT_EQ(Option(p.stacks[0].spec, "delay", "stall_period"), "60s");

  // A --duration given is kept, and the stalls are played in that period.
  bench::WorkloadKnobs given;
  given.duration_s = 120;
  const bench::Preset longer = Preset(&given, true);
  EXPECT_EQ(given.duration_s, 120);
  EXPECT_EQ(Option(longer.stacks[0].spec, "delay", "stall_period"), "120s");
}

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

TEST(KvmHypervPreset, CalibrationFollowsFromThePublishedNumbers) {
  const auto& pub = bench::PublishedKvmHyperv();
  ASSERT_EQ(pub.size(), 2u);
  const bench::GuestCalibration kvm = bench::CalibrateGuest(pub[0], 300);
  const bench::GuestCalibration hv = bench::CalibrateGuest(pub[1], 300);
  // Little's law: both keep 32 I/Os in flight (diskspd -o8 -t4).
  EXPECT_NEAR(kvm.in_flight, 32, 0.1);
  EXPECT_NEAR(hv.in_flight, 32, 0.1);
  // CPU per I/O: 27.20% x 2 / 1,977.23 and 1.22% x 2 / 1,000.57.
  EXPECT_NEAR(kvm.cpu_us, 275.13, 0.01);
  EXPECT_NEAR(hv.cpu_us, 24.39, 0.01);
  // One stall per 32 I/Os above the 3-nines, anchored at the published top nines.
  ASSERT_EQ(kvm.stalls_s.size(), 19u);
  EXPECT_NEAR(kvm.stalls_s[0], 38.3124, 1e-9);
  EXPECT_NEAR(kvm.stalls_s[1], 8.6559, 1e-9);
  EXPECT_NEAR(kvm.stalls_s[18], 0.2632, 1e-9);
  ASSERT_EQ(hv.stalls_s.size(), 10u);
  EXPECT_NEAR(hv.stalls_s[0], 2.4488, 1e-9);
  EXPECT_NEAR(hv.stalls_s[9], 0.869, 1e-9);
  EXPECT_EQ(kvm.run_stalls_s, kvm.stalls_s) << "300 s plays the published stalls";
  // A shorter run keeps the stalled share of time, in fewer, averaged stalls.
  const bench::GuestCalibration short_kvm = bench::CalibrateGuest(pub[0], 60);
  EXPECT_EQ(short_kvm.run_stalls_s.size(), 4u);
  EXPECT_NEAR(Sum(short_kvm.run_stalls_s), Sum(kvm.stalls_s) / 5, 1e-9);
  // The table in the spec is the calibrated one: its mean is Little's law's.
  for (const bench::GuestCalibration* c : {&kvm, &hv}) {
    auto table = ServiceTime::Parse("t", Option("d:" + c->delay_spec.substr(6), "d", "latency"));
    ASSERT_TRUE(table) << c->delay_spec;
    EXPECT_NEAR(table->mean_ns() / 1e6, c->table_mean_ms, 0.001 * c->table_mean_ms);
    EXPECT_GT(c->table_ms.back().second, c->table_ms[c->table_ms.size() - 2].second);
  }
}

// A short real run of the preset: the report shows each guest in diskspd's layout with the
// published numbers beside vstack's, the ratios with both columns, and the same in JSON.
TEST(KvmHypervReport, PrintsThePublishedAndTheMeasuredColumns) {
  bench::MatrixOptions o;
  o.knobs.warmup_s = 0.05;
  o.knobs.duration_s = 0.2;
  bench::Preset p = Preset(&o.knobs, true);
  o.stacks = p.stacks;
  o.rounds = 2;
  BenchReport r;
  r.preset = "kvm-vs-hyperv";
  r.result = bench::RunMatrix(o);
  r.summary = bench::Summarize(r.result);
  ASSERT_TRUE(r.result.error.empty()) << r.result.error;
  const std::string text = RenderPresetTables(r);
  for (const char* guest : {"KVM virtio (stack kvm-virtio", "Hyper-V gen 2 (stack hyperv-gen2"}) {
    EXPECT_NE(text.find(guest), std::string::npos) << text;
  }
  std::istringstream in(text);
  int totals = 0, published = 0, percentile_headers = 0, cpu_rows = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    totals += first == "total:";       // vstack's row of the Total IO table
    published += first == "published:";  // the published row beneath it
    percentile_headers += line.find("published Total (ms)") != std::string::npos &&
                          line.find("Total (ms)") < line.find("published Total (ms)");
    cpu_rows += line.find("avg.") != std::string::npos && line.find("27.20%") != std::string::npos;
  }
  EXPECT_EQ(totals, 2) << text;
  EXPECT_EQ(published, 2) << text;
  EXPECT_EQ(percentile_headers, 2) << text;
  EXPECT_EQ(cpu_rows, 1) << "KVM's avg. row carries the published 27.20%\n" << text;
  for (const char* row : {"min", "50th", "99th", "3-nines", "max"}) {
    EXPECT_NE(text.find("  " + std::string(row) + " "), std::string::npos) << row;
  }
  EXPECT_NE(text.find("1.976x"), std::string::npos) << "the published IOPS ratio";
  EXPECT_NE(text.find("Crossover"), std::string::npos);

  const nlohmann::json j = PresetTablesJson(r)["preset"];
  ASSERT_EQ(j["guests"].size(), 2u);
  for (const auto& g : j["guests"]) {
    EXPECT_GT(g["published"]["iops"].get<double>(), 0);
    EXPECT_GT(g["vstack"]["iops"].get<double>(), 0);
    EXPECT_TRUE(g["percentiles"]["50th"]["published_ms"].is_number());
    EXPECT_TRUE(g["percentiles"]["50th"]["vstack_ms"].is_number());
  }
  EXPECT_EQ(j["ratios"].size(), 3u);
}

}  // namespace
}  // namespace vstack::cli
