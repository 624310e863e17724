// vstack space [options] IMAGE...: vSAN-style space savings of a set of images, factor by factor
// (zero elimination, dedup, compression, metadata, protection), by scanning them with the
// layers' own code, by replaying them through real dedup and zstd layers, or by replaying them
// onto RBD images in Ceph pools and measuring the pools' real usage (--mode=ceph). The analysis
// is in analysis/space/; this file parses flags and prints (space_output.cc renders);
// docs/space-savings.md explains the report.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "analysis/space/space_ceph.h"
#include "analysis/space/space_estimate.h"
#include "analysis/space/space_images.h"
#include "analysis/space/space_replay.h"
#include "analysis/space/space_scan.h"
#include "lib/size.h"
#include "tools/command.h"
#include "tools/output.h"
#include "tools/progress.h"
#include "tools/space_output.h"
#include "tools/usage.h"

namespace vstack::cli {
namespace {

struct SpaceArgs {
  std::vector<std::string> images;
  std::string scope = "global";
  std::string grain = "4K";
  std::string dedup = "on";
  std::string codec = "zstd:1";
  std::string rule = "vsan-osa";
  std::string protection = "raid1";
  std::string checksum = "on";
  std::string mode = "scan";
  std::string replay_dir;
  std::string svg;
  std::string progress = "auto";
  unsigned threads = 0;
  OutputFormat output = OutputFormat::kText;
  bool estimate = false;
  std::string fraction;  // --fraction: 1% or 0.01
  std::string accuracy;  // --accuracy: 1%
  std::string confidence = "95%";
  uint64_t seed = 0;
  std::string sketch;
  std::vector<std::string> merge;  // `vstack space merge` inputs
  CephSpaceOptions ceph;           // --mode=ceph
};

// "1%" or "0.01": a fraction in (0, 1].
Result<double> ParseFraction(const std::string& name, const std::string& text) {
  std::string t = text;
  double scale = 1;
  if (!t.empty() && t.back() == '%') {
    t.pop_back();
    scale = 100;
  }
  char* end = nullptr;
  const double v = t.empty() ? 0 : std::strtod(t.c_str(), &end) / scale;
  if (t.empty() || *end != '\0' || !(v > 0) || v > 1) {
    return MakeError(
        Errc::kInvalidArgument,
        name + " " + text + ": expected a fraction such as 1% or 0.01, above 0, at most 1");
  }
  return v;
}

Result<SpaceOptions> Options(const SpaceArgs& a) {
  SpaceOptions o;
  VSTACK_RETURN_IF_ERROR(ParseScope(a.scope, &o));
  auto grain = ParseSize(a.grain);
  if (!grain) return Annotate(std::move(grain).error(), "--grain");
  if (*grain < 4096 || *grain > 65536 || (*grain & (*grain - 1))) {
    return MakeError(Errc::kInvalidArgument,
                     "--grain " + a.grain + ": not a power of two from 4K to 64K");
  }
  o.grain = static_cast<uint32_t>(*grain);
  o.dedup = a.dedup == "on";
  VSTACK_RETURN_IF_ERROR(ParseCodec(a.codec, &o));
  auto rule = ParseSizeRule(a.rule);
  if (!rule) return Annotate(std::move(rule).error(), "--rule");
  o.rule = *rule;
  VSTACK_RETURN_IF_ERROR(ParseProtection(a.protection, &o));
  o.checksum = a.checksum == "on";
  o.mode = a.mode == "replay" ? SpaceOptions::Mode::kReplay
           : a.mode == "ceph" ? SpaceOptions::Mode::kCeph
                              : SpaceOptions::Mode::kScan;
  if (o.mode != SpaceOptions::Mode::kCeph && !a.ceph.pools.empty()) {
    return MakeError(Errc::kInvalidArgument, "--pool needs --mode=ceph");
  }
  if (o.mode == SpaceOptions::Mode::kCeph && a.ceph.pools.empty()) {
    return MakeError(Errc::kInvalidArgument,
                     "--mode=ceph needs the pools to measure: --pool POOL (repeatable)");
  }
  o.threads = a.threads;
  o.seed = a.seed;
  auto confidence = ParseFraction("--confidence", a.confidence);
  if (!confidence || *confidence >= 1) {
    return MakeError(Errc::kInvalidArgument,
                     "--confidence " + a.confidence + ": expected a level such as 95%, below 100%");
  }
  o.confidence = *confidence;
  const bool sampling = !a.fraction.empty() || !a.accuracy.empty() || !a.sketch.empty();
  if (sampling && !a.estimate) {
    return MakeError(Errc::kInvalidArgument, "--fraction, --accuracy and --sketch need --estimate");
  }
  if (!a.estimate) return o;
  o.estimate = true;
  if (o.mode != SpaceOptions::Mode::kScan) {
    return MakeError(Errc::kInvalidArgument,
                     "--estimate and --mode=" + a.mode + " do not go together");
  }
  if (!a.fraction.empty() && !a.accuracy.empty()) {
    return MakeError(Errc::kInvalidArgument, "give --fraction or --accuracy, not both");
  }
  if (!a.accuracy.empty()) {
    auto accuracy = ParseFraction("--accuracy", a.accuracy);
    if (!accuracy) return std::move(accuracy).error();
    o.cap = CapFor(*accuracy, o.confidence);
    o.modulus = 1;
  } else {
    auto fraction = ParseFraction("--fraction", a.fraction.empty() ? "1%" : a.fraction);
    if (!fraction) return std::move(fraction).error();
    o.modulus = static_cast<uint64_t>(std::llround(1 / *fraction));
  }
  return o;
}

// The estimate's cost lines: what it read against what it covers, its memory and time.
std::string CostText(const EstimateCost& c, const SpaceSketch& s, double seconds) {
  auto pct = [](uint64_t a, uint64_t b) { return b ? 100.0 * double(a) / double(b) : 0.0; };
  std::string out = fmt::format(
      "\nestimate: covered {} allocated, read {} ({:.1f}%), hashed {}, compressed {} ({:.2f}%)\n",
      FormatSize(c.bytes_covered), FormatSize(c.bytes_read), pct(c.bytes_read, c.bytes_covered),
      FormatSize(c.bytes_hashed), FormatSize(c.bytes_compressed),
      pct(c.bytes_compressed, c.bytes_covered));
  if (s.params.dedup) {
    out += fmt::format(
        "          fingerprints kept: {} of {} non-zero grains hashed ({:.2f}%), at most {} held "
        "at once (about {})\n",
        s.sample.size(), c.nonzero_grains, pct(s.sample.size(), c.nonzero_grains),
        c.peak_fingerprints, FormatSize(c.peak_memory_bytes));
  }
  out += fmt::format("          took {:.2f} s\n", seconds);
  return out;
}

nlohmann::json CostJson(const EstimateCost& c, const SpaceSketch& s, double seconds) {
  return {{"fraction", s.Fraction()},
          {"sample_fingerprints", s.sample.size()},
          {"sampled_grains", s.sampled_grains},
          {"bytes_covered", c.bytes_covered},
          {"bytes_read", c.bytes_read},
          {"bytes_hashed", c.bytes_hashed},
          {"bytes_compressed", c.bytes_compressed},
          {"nonzero_grains_hashed", c.nonzero_grains},
          {"peak_fingerprints", c.peak_fingerprints},
          {"peak_memory_bytes", c.peak_memory_bytes},
          {"seconds", seconds}};
}

// Prints a report in the chosen form (and the chart, if asked).
void Print(const SpaceArgs& a, const SpaceReport& report, const SpaceOptions& o,
           const std::vector<SpaceImage>& images, size_t image_count, const std::string& note,
           const nlohmann::json& estimate, const std::string& estimate_text,
           const ReplayPhysical* physical = nullptr, const CephSpaceResult* ceph = nullptr) {
  if (!a.svg.empty()) {
    std::ofstream f(a.svg);
    f << SpaceSvg(report, o, image_count);
    if (!f) Fail("space", "cannot write '" + a.svg + "'");
  }
  if (a.output == OutputFormat::kJson) {
    nlohmann::json j = SpaceJson(report, o, images);
    j["notes"] = note.empty() ? nlohmann::json::array() : nlohmann::json::array({note});
    if (!estimate.is_null()) j["estimate"] = estimate;
    if (physical) j["physical"] = ReplayPhysicalJson(*physical);
    if (ceph) j["ceph"] = CephMeasureJson(*ceph, o);
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}{}{}{}", SpaceText(report, o, image_count), estimate_text,
               physical ? ReplayPhysicalText(*physical) : "",
               ceph ? CephMeasureText(*ceph, o) : "");
  }
}

void RunMerge(const SpaceArgs& a) {
  std::optional<SpaceSketch> merged;
  for (const std::string& path : a.merge) {
    std::ifstream f(path, std::ios::binary);
    if (!f) Fail("space merge", "cannot open '" + path + "'");
    std::stringstream bytes;
    bytes << f.rdbuf();
    auto s = ParseSketch(bytes.str(), path);
    if (!s) Fail("space merge", s.error().message);
    if (!merged) {
      merged = std::move(*s);
      continue;
    }
    Status ok = Merge(&*merged, *s);
    if (!ok) Fail("space merge", path + ": " + ok.error().message);
  }
  SpaceArgs options = a;  // the report's options; the sketch's parameters replace the rest
  options.sketch.clear();
  auto base = Options(options);
  if (!base) FailUsage("space merge", base.error().message);
  SpaceOptions o = *base;
  ApplyParams(merged->params, &o);
  const SpaceReport report = EstimateReport(*merged, o);
  if (!a.sketch.empty()) {
    std::ofstream f(a.sketch, std::ios::binary | std::ios::trunc);
    f << SerializeSketch(*merged);
    if (!f.flush()) Fail("space merge", "cannot write sketch '" + a.sketch + "'");
  }
  const size_t n = static_cast<size_t>(merged->images);
  nlohmann::json j = {{"sketches", a.merge.size()},
                      {"fraction", merged->Fraction()},
                      {"sample_fingerprints", merged->sample.size()},
                      {"sampled_grains", merged->sampled_grains},
                      {"bytes_read", merged->bytes_read}};
  const std::string text = fmt::format(
      "\nmerged {} sketches: {} images, {} sampled fingerprints, {} read by the hosts\n",
      a.merge.size(), merged->images, merged->sample.size(), FormatSize(merged->bytes_read));
  Print(a, report, o, {}, n, "", j, text);
}

void Run(const SpaceArgs& a) {
  auto o = Options(a);
  if (!o) FailUsage("space", o.error().message);
  // groups=N with N >= the images is per-image scope: said in a note (stderr, or JSON "notes").
  std::string note;
  if (o->scope == SpaceOptions::Scope::kGroups && o->groups > 1 && o->groups >= a.images.size()) {
    note = fmt::format(
        "--scope groups={} with {} image{} puts every image in a group of its own, which is the "
        "same as --scope image",
        o->groups, a.images.size(), a.images.size() == 1 ? "" : "s");
    if (a.output != OutputFormat::kJson) {
      std::fprintf(stderr, "vstack space: note: %s\n", note.c_str());
    }
  }
  auto images = OpenSpaceImages(a.images, o->grain);
  if (!images) Fail("space", images.error());
  uint64_t total = 0;
  for (const SpaceImage& i : *images) total += i.used_bytes();
  Progress progress(o->estimate ? "estimate" : a.mode, total, Progress::Wanted(a.progress, total));
  const SpaceProgress on_bytes = [&progress](uint64_t bytes) { progress.Add(bytes); };
  if (o->estimate) {
    const auto start = std::chrono::steady_clock::now();
    EstimateCost cost;
    auto sketch = SketchImages(*images, *o, &cost, on_bytes);
    progress.Finish();
    if (!sketch && sketch.error().code == make_error_code(Errc::kInvalidArgument)) {
      FailUsage("space", sketch.error().message);
    }
    if (!sketch) Fail("space", sketch.error());
    const SpaceReport report = EstimateReport(*sketch, *o);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!a.sketch.empty()) {
      std::ofstream f(a.sketch, std::ios::binary | std::ios::trunc);
      f << SerializeSketch(*sketch);
      if (!f.flush()) Fail("space", "cannot write sketch '" + a.sketch + "'");
    }
    Print(a, report, *o, *images, images->size(), note, CostJson(cost, *sketch, seconds),
          CostText(cost, *sketch, seconds));
    return;
  }
  if (o->mode == SpaceOptions::Mode::kCeph) {
    auto measured = MeasureOnCeph(*images, *o, a.ceph, on_bytes);
    progress.Finish();
    if (!measured && measured.error().code == make_error_code(Errc::kInvalidArgument)) {
      FailUsage("space", measured.error().message);
    }
    if (!measured) Fail("space", measured.error());
    Print(a, BuildReport(measured->counts, *o), *o, *images, images->size(), note, nullptr, "",
          measured->layers.empty() ? nullptr : &measured->physical, &*measured);
    return;
  }
  const bool replay = o->mode == SpaceOptions::Mode::kReplay;
  ReplayPhysical physical;
  Result<SpaceCounts> counts = replay ? ReplayImages(*images, *o, a.replay_dir, on_bytes, &physical)
                                      : ScanImages(*images, *o, on_bytes);
  progress.Finish();
  if (!counts && counts.error().code == make_error_code(Errc::kInvalidArgument)) {
    FailUsage("space", counts.error().message);  // options that do not go together
  }
  if (!counts) Fail("space", counts.error());
  Print(a, BuildReport(*counts, *o), *o, *images, images->size(), note, nullptr, "",
        replay ? &physical : nullptr);
}

}  // namespace

void AddSpaceCommand(CLI::App& app) {
  auto a = std::make_shared<SpaceArgs>();
  CLI::App* cmd = app.add_subcommand(
      "space",
      "vSAN-style space savings of images, factor by factor (zero elimination, dedup, "
      "compression, metadata, protection)");
  cmd->add_option("images", a->images, "raw or VHD image files, or stack specs");
  cmd->add_option("--scope", a->scope,
                  "dedup domain: global, image, or groups=N (like vSAN disk "
                  "groups: image i goes to group i mod N)")
      ->default_str("global");
  cmd->add_option("--grain", a->grain, "dedup and compression grain, 4K to 64K")->default_str("4K");
  Choices(cmd->add_option("--dedup", a->dedup, "deduplicate (default: on)"), {"on", "off"});
  cmd->add_option("--codec", a->codec, "compression: zstd:LEVEL or none")->default_str("zstd:1");
  cmd->add_option("--rule", a->rule,
                  "stored size of a compressed grain: vsan-osa, sector, "
                  "packed or min-saving=P")
      ->default_str("vsan-osa");
  cmd->add_option("--protection", a->protection,
                  "none, raid1 (2x), ftt2 (3x), raid5 (3+1), raid6 (4+2)")
      ->default_str("raid1");
  Choices(cmd->add_option("--checksum", a->checksum,
                          "count 5 bytes of checksum per 4 KiB stored, like vSAN (default: on)"),
          {"on", "off"});
  Choices(cmd->add_option("--mode", a->mode,
                          "scan (default): hash and compress without writing; replay: write "
                          "through real dedup and zstd layers; ceph: replay onto a new RBD "
                          "image in each --pool and measure the pool's real STORED and USED "
                          "(`ceph df detail`) against the modelled protection factor"),
          {"scan", "replay", "ceph"});
  cmd->add_option("--pool", a->ceph.pools,
                  "--mode=ceph: a Ceph pool to measure (repeatable): replicated, or "
                  "erasure-coded with allow_ec_overwrites (image headers then go to "
                  "--metadata-pool); needs a ceph-mgr and BlueStore OSDs")
      ->allow_extra_args(false);  // one pool per --pool: the images follow
  cmd->add_option("--metadata-pool", a->ceph.metadata_pool,
                  "--mode=ceph: replicated pool for the headers of images whose data is in an "
                  "EC pool")
      ->default_str("rbd");
  cmd->add_option("--ceph-conf", a->ceph.conf,
                  "--mode=ceph: ceph.conf (default: $CEPH_CONF, then /etc/ceph/ceph.conf)");
  cmd->add_option("--ceph-id", a->ceph.id, "--mode=ceph: client id, without 'client.'")
      ->default_str("admin");
  cmd->add_option("--ceph-timeout", a->ceph.timeout_s,
                  "--mode=ceph: seconds to wait for the monitors (1..300; for the OSDs' "
                  "statistics to reach them, 12 times as long)")
      ->default_str("10")
      ->check(CLI::Range(1, 300));
  cmd->add_flag("--keep-image", a->ceph.keep,
                "--mode=ceph: keep the RBD images written (default: removed after measuring)");
  cmd->add_option("--replay-dir", a->replay_dir,
                  "replay onto sparse files in this directory instead of memory");
  cmd->add_option("--svg", a->svg, "also write a waterfall chart to this SVG file");
  Choices(cmd->add_option("--progress", a->progress,
                          "progress bar on stderr (default: auto, on when stderr is a terminal "
                          "and the images hold 256 MiB or more)"),
          {"auto", "on", "off"});
  cmd->add_option("--threads", a->threads, "worker threads (default: one per CPU)");
  cmd->add_flag("--estimate", a->estimate,
                "estimate from a sample, every factor with its confidence interval, instead of "
                "the exact scan");
  cmd->add_option("--fraction", a->fraction,
                  "--estimate: the fraction of fingerprints (or, without dedup, grains) sampled "
                  "(default: 1%)");
  cmd->add_option("--accuracy", a->accuracy,
                  "--estimate: a target relative accuracy such as 1% instead of a fraction");
  cmd->add_option("--confidence", a->confidence, "--estimate: the intervals' confidence")
      ->default_str("95%");
  cmd->add_option("--seed", a->seed, "--estimate: the seed of the sampling hash (default: 0)");
  cmd->add_option("--sketch", a->sketch,
                  "--estimate: also write the sample to this sketch file, for `vstack space "
                  "merge`");
  AddOutputOption(cmd, &a->output);
  CLI::App* merge = cmd->add_subcommand(
      "merge",
      "the combined estimate of sketches written by `vstack space --estimate --sketch` "
      "(for example one per host)");
  merge->add_option("sketches", a->merge, "sketch files (.vss)")->required();
  merge->add_option("--svg", a->svg, "also write a waterfall chart to this SVG file");
  merge->add_option("--sketch", a->sketch, "also write the merged sketch to this file");
  merge->add_option("--protection", a->protection, "none, raid1, ftt2, raid5, raid6")
      ->default_str("raid1");
  Choices(merge->add_option("--checksum", a->checksum, "count checksums (default: on)"),
          {"on", "off"});
  merge->add_option("--confidence", a->confidence, "the intervals' confidence")->default_str("95%");
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
