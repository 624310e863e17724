// vstack space [options] IMAGE...: vSAN-style space savings of a set of images, factor by factor
// (zero elimination, dedup, compression, metadata, protection), by scanning them with the
// layers' own code or by replaying them through real dedup and zstd layers. The analysis is in
// analysis/space/; this file parses flags and prints (space_output.cc renders);
// docs/space-savings.md explains the report.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "lib/size.h"
#include "tools/command.h"
#include "tools/output.h"
#include "tools/progress.h"
#include "analysis/space/space_images.h"
#include "analysis/space/space_replay.h"
#include "analysis/space/space_scan.h"
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
};

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
  o.mode = a.mode == "replay" ? SpaceOptions::Mode::kReplay : SpaceOptions::Mode::kScan;
  o.threads = a.threads;
  return o;
}

void Run(const SpaceArgs& a) {
  auto o = Options(a);
  if (!o) FailUsage("space", o.error().message);
  // groups=N with N >= the images is per-image scope: said in a note (stderr, or JSON "notes").
  std::string note;
  if (o->scope == SpaceOptions::Scope::kGroups && o->groups > 1 &&
      o->groups >= a.images.size()) {
    note = fmt::format(
        "--scope groups={} with {} image{} puts every image in a group of its own, which is the "
        "same as --scope image",
        o->groups, a.images.size(), a.images.size() == 1 ? "" : "s");
    if (a.output != OutputFormat::kJson) {
      std::fprintf(stderr, "vstack space: note: %s\n", note.c_str());
    }
  }
  auto images = OpenSpaceImages(a.images, o->grain);
  if (!images) Fail("space", images.error().ToString());
  uint64_t total = 0;
  for (const SpaceImage& i : *images) total += i.used_bytes();
  Progress progress(a.mode, total, Progress::Wanted(a.progress, total));
  const SpaceProgress on_bytes = [&progress](uint64_t bytes) { progress.Add(bytes); };
  Result<SpaceCounts> counts = o->mode == SpaceOptions::Mode::kScan
                                   ? ScanImages(*images, *o, on_bytes)
                                   : ReplayImages(*images, *o, a.replay_dir, on_bytes);
  progress.Finish();
  if (!counts && counts.error().code == make_error_code(Errc::kInvalidArgument)) {
    FailUsage("space", counts.error().message);  // options that do not go together
  }
  if (!counts) Fail("space", counts.error().ToString());
  const SpaceReport report = BuildReport(*counts, *o);
  if (!a.svg.empty()) {
    std::ofstream f(a.svg);
    f << SpaceSvg(report, *o, images->size());
    if (!f) Fail("space", "cannot write '" + a.svg + "'");
  }
  if (a.output == OutputFormat::kJson) {
    nlohmann::json j = SpaceJson(report, *o, *images);
    j["notes"] = note.empty() ? nlohmann::json::array() : nlohmann::json::array({note});
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}", SpaceText(report, *o, images->size()));
  }
}

}  // namespace

void AddSpaceCommand(CLI::App& app) {
  auto a = std::make_shared<SpaceArgs>();
  CLI::App* cmd = app.add_subcommand(
      "space", "vSAN-style space savings of images, factor by factor (zero elimination, dedup, "
               "compression, metadata, protection)");
  cmd->add_option("images", a->images, "raw or VHD image files, or stack specs")->required();
  cmd->add_option("--scope", a->scope, "dedup domain: global, image, or groups=N (like vSAN disk "
                                       "groups: image i goes to group i mod N)")
      ->default_str("global");
  cmd->add_option("--grain", a->grain, "dedup and compression grain, 4K to 64K")->default_str("4K");
  Choices(cmd->add_option("--dedup", a->dedup, "deduplicate (default: on)"), {"on", "off"});
  cmd->add_option("--codec", a->codec, "compression: zstd:LEVEL or none")->default_str("zstd:1");
  cmd->add_option("--rule", a->rule, "stored size of a compressed grain: vsan-osa, sector, "
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
                          "through real dedup and zstd layers"),
          {"scan", "replay"});
  cmd->add_option("--replay-dir", a->replay_dir,
                  "replay onto sparse files in this directory instead of memory");
  cmd->add_option("--svg", a->svg, "also write a waterfall chart to this SVG file");
  Choices(cmd->add_option("--progress", a->progress,
                          "progress bar on stderr (default: auto, on when stderr is a terminal "
                          "and the images hold 256 MiB or more)"),
          {"auto", "on", "off"});
  cmd->add_option("--threads", a->threads, "worker threads (default: one per CPU)");
  AddOutputOption(cmd, &a->output);
  cmd->callback([a] { Run(*a); });
}

}  // namespace vstack::cli
