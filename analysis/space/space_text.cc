// The text of a vstack space report (space_render.h): the table of steps, the ratios, and the
// paragraphs of an estimate, a merge, a replay and a Ceph measurement.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analysis/space/space_render.h"
#include "lib/size.h"
#include "lib/text_table.h"

namespace vstack {
namespace {

std::string Codec(const SpaceOptions& o) {
  return o.compress ? "zstd:" + std::to_string(o.level) + ", rule " + FormatSizeRule(o.rule)
                    : "none";
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

// A merge's line: how many sketches, images and fingerprints.
std::string MergeText(const SpaceSketch& s, size_t files) {
  return fmt::format("\nmerged {} sketches: {} images, {} sampled fingerprints, {} read by the hosts\n",
                     files, s.images, s.sample.size(), FormatSize(s.bytes_read));
}

}  // namespace

std::string SpaceModeName(const SpaceOptions& o) {
  if (o.estimate) return "estimate";
  switch (o.mode) {
    case SpaceOptions::Mode::kScan:
      return "scan";
    case SpaceOptions::Mode::kReplay:
      return "replay";
    case SpaceOptions::Mode::kCeph:
      return "replay onto Ceph";
  }
  return "?";
}

std::string SpaceRatioNumber(double ratio) {
  return std::isinf(ratio) ? "\u221e" : fmt::format("{:.2f}", ratio);
}

std::string SpaceRatioText(double ratio, double low, double high) {
  if (SpaceRatioNumber(low) == SpaceRatioNumber(high)) return SpaceRatioNumber(ratio) + "x";
  return fmt::format("{}x ({}\u2013{})", SpaceRatioNumber(ratio), SpaceRatioNumber(low),
                     SpaceRatioNumber(high));
}

std::string SpaceScopeName(const SpaceOptions& o) {
  switch (o.scope) {
    case SpaceOptions::Scope::kGlobal:
      return "global";
    case SpaceOptions::Scope::kImage:
      return "image";
    case SpaceOptions::Scope::kGroups:
      return "groups=" + std::to_string(o.groups);
  }
  return "?";
}

std::string DescribeSpaceRun(const SpaceOptions& o, size_t images) {
  std::string mode = SpaceModeName(o);
  if (o.estimate) {
    mode += fmt::format(" ({}{}, {:g}% intervals)",
                        o.dedup ? "fingerprints sampled 1 in " : "grains sampled 1 in ", o.modulus,
                        o.confidence * 100);
    if (o.cap) mode.insert(mode.size() - 1, fmt::format(", at most {} kept", o.cap));
  }
  return fmt::format("{} image{}, scope {}, grain {}, dedup {}, codec {}, {}, checksums {}, {}",
                     images, images == 1 ? "" : "s", SpaceScopeName(o), FormatSize(o.grain),
                     o.dedup ? "on" : "off", Codec(o), DescribeProtection(o.protection),
                     o.checksum ? "on" : "off", mode);
}

std::string SpaceText(const SpaceReport& r, const SpaceOptions& o, size_t images) {
  const bool estimated = r.confidence > 0;
  std::vector<std::string> head = {"step", "bytes", "size", "ratio"};
  if (estimated)
    head = {"step", "bytes", "size", fmt::format("{:g}% interval", r.confidence * 100),
            "ratio (interval)"};
  TextTable t(head, estimated ? std::vector<bool>{false, true, true, true, true}
                              : std::vector<bool>{false, true, true, true});
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const SpaceStep& s = r.steps[i];
    const std::string ratio = i == 0 ? "" : SpaceRatioText(s.ratio, s.ratio_low, s.ratio_high);
    if (!estimated) {
      t.AddRow({s.label, std::to_string(s.bytes), FormatSize(s.bytes), ratio});
      continue;
    }
    const std::string range = s.bytes_low == s.bytes_high
                                  ? "exact"
                                  : FormatSize(s.bytes_low) + " – " + FormatSize(s.bytes_high);
    t.AddRow({s.label, std::to_string(s.bytes), FormatSize(s.bytes), range, ratio});
  }
  std::string out = DescribeSpaceRun(o, images) + "\n\n" + t.Render();
  out += fmt::format("\ndata reduction (used / with metadata):  {}\n",
                     SpaceRatioText(r.data_reduction, r.data_reduction_low, r.data_reduction_high));
  out += fmt::format("overall (used / after protection):      {}\n",
                     SpaceRatioText(r.overall, r.overall_low, r.overall_high));
  return out;
}

std::string ReplayPhysicalText(const ReplayPhysical& p) {
  return fmt::format(
      "\nphysical (replay): the layers hold the stored data in {} ({} B), the model {} ({} B): "
      "{:+.1f}%\n",
      FormatSize(p.physical_bytes), p.physical_bytes, FormatSize(p.modelled_bytes),
      p.modelled_bytes, p.difference() * 100);
}

std::string CephMeasureText(const CephSpaceResult& r, const SpaceOptions& o) {
  std::string out = fmt::format(
      "\nmeasured on Ceph (`ceph df detail` before and after, once every OSD reported; stack {}; "
      "{} of image data; BlueStore allocation unit {}):\n",
      r.layers.empty() ? "rbd: alone" : r.layers + "+rbd:", FormatSize(r.logical_bytes),
      r.min_alloc_size ? FormatSize(r.min_alloc_size) : "unknown");
  TextTable t({"pool", "scheme", "written", "STORED +", "USED +", "USED/STORED", "modelled", "gap",
               "overall", "overall modelled"},
              {false, false, true, true, true, true, false, true, true, true});
  for (const CephPoolMeasure& m : r.pools) {
    const std::string vsan = VsanCounterpart(m.pool);
    const double gap = m.factor_gap();
    const CephEndToEnd e = EndToEndOf(r, m, o);
    t.AddRow({m.pool.name, m.pool.Scheme(), FormatSize(m.written_bytes),
              FormatSize(uint64_t(std::max<int64_t>(0, m.data.stored))),
              FormatSize(uint64_t(std::max<int64_t>(0, m.data.used))),
              fmt::format("{:.3f}x", m.measured_factor()),
              fmt::format("{:.2f}x{}", m.modelled_factor(), vsan.empty() ? "" : " (" + vsan + ")"),
              fmt::format("{:+.2f}%", gap * 100), fmt::format("{:.2f}x", e.measured),
              fmt::format("{:.2f}x", e.modelled)});
  }
  out += t.Render("  ");
  out +=
      "  (written: the stack's data on the image; STORED +, USED +: the pool's change; "
      "overall: used / USED, the model's with the pool's factor)\n";
  for (const CephPoolMeasure& m : r.pools) {
    out += fmt::format("why {} differs from {:.2f}x{}:\n", m.pool.name, m.modelled_factor(),
                       m.kept ? " (image " + m.image + " kept)" : "");
    for (const std::string& line : ExplainGap(m, r.min_alloc_size)) out += "  - " + line + "\n";
  }
  return out;
}

std::string SpaceRunText(const SpaceRun& run) {
  std::string out = SpaceText(run.report, run.options, run.image_count);
  if (run.sketch) {
    out += run.merged_sketches ? MergeText(*run.sketch, run.merged_sketches)
                               : CostText(run.cost, *run.sketch, run.seconds);
  }
  if (run.physical) out += ReplayPhysicalText(*run.physical);
  if (run.ceph) out += CephMeasureText(*run.ceph, run.options);
  return out;
}

}  // namespace vstack
