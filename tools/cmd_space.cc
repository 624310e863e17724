// vstack space [options] IMAGE...: vSAN-style space savings of a set of images, factor by factor
// (zero elimination, dedup, compression, metadata, protection), by scanning them with the
// layers' own code, by replaying them through real dedup and zstd layers, or by replaying them
// onto RBD images in Ceph pools and measuring the pools' real usage (--mode=ceph). The analysis
// and its report are library calls in analysis/space/ (space_run.h, space_render.h); this file
// parses flags and prints. docs/space-savings.md explains the report.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <system_error>

#include "analysis/space/space.h"
#include "analysis/space/space_knobs.h"
#include "analysis/space/space_render.h"
#include "analysis/space/space_run.h"
#include "tools/command.h"
#include "tools/interrupt.h"
#include "tools/output.h"
#include "tools/progress.h"
#include "tools/usage.h"

namespace vstack::cli {
namespace {

// The knobs (analysis/space/space_knobs.h), and what only the command line has: the images or
// sketches named, the chart file, the progress bar and the output format.
struct SpaceArgs {
  SpaceKnobs knobs;
  std::vector<std::string> images;
  std::vector<std::string> merge;  // `vstack space merge` inputs
  std::string svg;
  std::string progress = "auto";
  OutputFormat output = OutputFormat::kText;
};

// Writes `bytes` to `path`, or fails `command`: "cannot write <what>: <errno text>".
void WriteOutputFile(const std::string& command, const std::string& what, const std::string& path,
                     const std::string& bytes) {
  errno = 0;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
  if (!f.flush()) {
    const std::error_code why(errno != 0 ? errno : EIO, std::system_category());
    Fail(command, "cannot write " + what + ": " + why.message());
  }
}

// Writes a run's sketch file for `vstack space merge` (--sketch), if asked.
void WriteSketch(const std::string& command, const std::string& path, const SpaceResult& r) {
  if (path.empty() || r.sketch.empty()) return;
  WriteOutputFile(command, "sketch '" + path + "'", path, r.sketch);
}

// Prints a run's report in the chosen form (and writes the chart and the sketch, if asked).
void Print(const std::string& command, const SpaceArgs& a, const SpaceRun& run) {
  const SpaceResult r = SpaceResultOf(run);
  WriteSketch(command, a.knobs.sketch, r);
  if (!a.svg.empty()) {
    WriteOutputFile(command, "'" + a.svg + "'", a.svg, r.svg);
  }
  fmt::print("{}", a.output == OutputFormat::kJson ? r.json + "\n" : r.text);
  if (a.output != OutputFormat::kJson) {
    for (const std::string& note : r.notes)
      std::fprintf(stderr, "vstack space: note: %s\n", note.c_str());
  }
}

void RunMerge(const SpaceArgs& a) {
  auto merged = MergeSketchFiles(a.merge);
  if (!merged) Fail("space merge", merged.error().message);
  SpaceKnobs knobs = a.knobs;  // the report's options; the sketch's parameters replace the rest
  knobs.sketch.clear();
  auto base = SpaceOptionsFrom(knobs);
  if (!base) FailUsage("space merge", base.error().message);
  Print("space merge", a, MergedRun(std::move(*merged), *base, a.merge.size()));
}

void Run(const SpaceArgs& a) {
  auto o = SpaceOptionsFrom(a.knobs);
  if (!o) FailUsage("space", o.error().message);
  auto images = OpenSpaceImages(a.images, o->grain);
  if (!images) Fail("space", images.error());
  uint64_t total = 0;
  for (const SpaceImage& i : *images) total += i.used_bytes();
  Progress progress(o->estimate ? "estimate" : a.knobs.mode, total,
                    Progress::Wanted(a.progress, total));
  InterruptScope interrupt;  // Ctrl-C: the run stops and removes what it created
  auto run = RunSpace(*o, a.knobs, std::move(*images), [&progress](uint64_t bytes) {
    progress.Add(bytes);
    return !InterruptScope::stop().load();
  });
  progress.Finish();
  if (!run && run.error().code == make_error_code(Errc::kCancelled)) {
    Fail("space",
         run.error().message + (a.knobs.mode == "scan" || o->estimate
                                    ? ""
                                    : "; what the replay had written was removed"),
         130);
  }
  if (!run && run.error().code == make_error_code(Errc::kInvalidArgument)) {
    FailUsage("space", run.error().message);  // options that do not go together
  }
  if (!run) Fail("space", run.error());
  Print("space", a, *run);
}

}  // namespace

void AddSpaceCommand(CLI::App& app) {
  auto a = std::make_shared<SpaceArgs>();
  CLI::App* cmd = app.add_subcommand(
      "space",
      "vSAN-style space savings of images, factor by factor (zero elimination, dedup, "
      "compression, metadata, protection)");
  cmd->add_option("images", a->images, "raw or VHD image files, or stack specs");
  cmd->add_option("--scope", a->knobs.scope,
                  "dedup domain: global, image, or groups=N (like vSAN disk "
                  "groups: image i goes to group i mod N)")
      ->default_str("global");
  cmd->add_option("--grain", a->knobs.grain, "dedup and compression grain, 4K to 64K")->default_str("4K");
  Choices(cmd->add_option("--dedup", a->knobs.dedup, "deduplicate (default: on)"), {"on", "off"});
  cmd->add_option("--codec", a->knobs.codec, "compression: zstd:LEVEL or none")->default_str("zstd:1");
  cmd->add_option("--rule", a->knobs.rule,
                  "stored size of a compressed grain: vsan-osa, sector, "
                  "packed or min-saving=P")
      ->default_str("vsan-osa");
  cmd->add_option("--protection", a->knobs.protection,
                  "none, raid1 (2x), ftt2 (3x), raid5 (3+1), raid6 (4+2)")
      ->default_str("raid1");
  Choices(cmd->add_option("--checksum", a->knobs.checksum,
                          "count 5 bytes of checksum per 4 KiB stored, like vSAN (default: on)"),
          {"on", "off"});
  Choices(cmd->add_option("--mode", a->knobs.mode,
                          "scan (default): hash and compress without writing; replay: write "
                          "through real dedup and zstd layers; ceph: replay onto a new RBD "
                          "image in each --pool and measure the pool's real STORED and USED "
                          "(`ceph df detail`) against the modelled protection factor"),
          {"scan", "replay", "ceph"});
  cmd->add_option("--pool", a->knobs.ceph.pools,
                  "--mode=ceph: a Ceph pool to measure (repeatable): replicated, or "
                  "erasure-coded with allow_ec_overwrites (image headers then go to "
                  "--metadata-pool); needs a ceph-mgr and BlueStore OSDs")
      ->allow_extra_args(false);  // one pool per --pool: the images follow
  cmd->add_option("--metadata-pool", a->knobs.ceph.metadata_pool,
                  "--mode=ceph: replicated pool for the headers of images whose data is in an "
                  "EC pool")
      ->default_str("rbd");
  cmd->add_option("--ceph-conf", a->knobs.ceph.conf,
                  "--mode=ceph: ceph.conf (default: $CEPH_CONF, then /etc/ceph/ceph.conf)");
  cmd->add_option("--ceph-id", a->knobs.ceph.id, "--mode=ceph: client id, without 'client.'")
      ->default_str("admin");
  cmd->add_option("--ceph-timeout", a->knobs.ceph.timeout_s,
                  "--mode=ceph: seconds to wait for the monitors (1..300; for the OSDs' "
                  "statistics to reach them, 12 times as long)")
      ->default_str("10")
      ->check(CLI::Range(1, 300));
  cmd->add_flag("--keep-image", a->knobs.ceph.keep,
                "--mode=ceph: keep the RBD images written (default: removed after measuring)");
  cmd->add_option("--replay-dir", a->knobs.replay_dir,
                  "replay onto sparse files in this directory instead of memory");
  cmd->add_option("--svg", a->svg, "also write a waterfall chart to this SVG file");
  Choices(cmd->add_option("--progress", a->progress,
                          "progress bar on stderr (default: auto, on when stderr is a terminal "
                          "and the images hold 256 MiB or more)"),
          {"auto", "on", "off"});
  cmd->add_option("--threads", a->knobs.threads,
                  "worker threads, at most 1024 (default: one per CPU)");
  cmd->add_flag("--estimate", a->knobs.estimate,
                "estimate from a sample, every factor with its confidence interval, instead of "
                "the exact scan");
  cmd->add_option("--fraction", a->knobs.fraction,
                  "--estimate: the fraction of fingerprints (or, without dedup, grains) sampled "
                  "(default: 1%)");
  cmd->add_option("--accuracy", a->knobs.accuracy,
                  "--estimate: a target relative accuracy such as 1% instead of a fraction");
  cmd->add_option("--confidence", a->knobs.confidence, "--estimate: the intervals' confidence")
      ->default_str("95%");
  WholeNumber(cmd->add_option("--seed", a->knobs.seed, "--estimate: the seed of the sampling hash (default: 0)"));
  cmd->add_option("--sketch", a->knobs.sketch,
                  "--estimate: also write the sample to this sketch file, for `vstack space "
                  "merge`");
  AddOutputOption(cmd, &a->output);
  CLI::App* merge = cmd->add_subcommand(
      "merge",
      "the combined estimate of sketches written by `vstack space --estimate --sketch` "
      "(for example one per host)");
  merge->add_option("sketches", a->merge, "sketch files (.vss)")->required();
  merge->add_option("--svg", a->svg, "also write a waterfall chart to this SVG file");
  merge->add_option("--sketch", a->knobs.sketch, "also write the merged sketch to this file");
  merge->add_option("--protection", a->knobs.protection, "none, raid1, ftt2, raid5, raid6")
      ->default_str("raid1");
  Choices(merge->add_option("--checksum", a->knobs.checksum, "count checksums (default: on)"),
          {"on", "off"});
  merge->add_option("--confidence", a->knobs.confidence, "the intervals' confidence")->default_str("95%");
  AddOutputOption(merge, &a->output);
  merge->callback([a] { RunMerge(*a); });
  cmd->callback([a, cmd, merge] {
    if (merge->parsed()) return;
    if (a->images.empty())
      FailUsage("space", "give the images to analyse (or: vstack space merge SKETCH...)");
    Run(*a);
  });
}

}  // namespace vstack::cli
