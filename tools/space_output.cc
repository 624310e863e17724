#include "tools/space_output.h"

#include <fmt/format.h>

#include <algorithm>

#include "lib/size.h"
#include "tools/output.h"

namespace vstack::cli {
namespace {

std::string ModeName(const SpaceOptions& o) {
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

// "1.82x (1.79-1.85)" for an estimated ratio, "1.82x" for an exact one.
std::string Ratio(double ratio, double low, double high) {
  if (low == high) return fmt::format("{:.2f}x", ratio);
  return fmt::format("{:.2f}x ({:.2f}\u2013{:.2f})", ratio, low, high);
}

std::string ScopeName(const SpaceOptions& o) {
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

std::string Codec(const SpaceOptions& o) {
  return o.compress ? "zstd:" + std::to_string(o.level) + ", rule " + FormatSizeRule(o.rule)
                    : "none";
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string DescribeSpaceRun(const SpaceOptions& o, size_t images) {
  std::string mode = ModeName(o);
  if (o.estimate) {
    mode += fmt::format(" ({}{}, {:g}% intervals)",
                        o.dedup ? "fingerprints sampled 1 in " : "grains sampled 1 in ", o.modulus,
                        o.confidence * 100);
    if (o.cap) mode.insert(mode.size() - 1, fmt::format(", at most {} kept", o.cap));
  }
  return fmt::format("{} image{}, scope {}, grain {}, dedup {}, codec {}, {}, checksums {}, {}",
                     images, images == 1 ? "" : "s", ScopeName(o), FormatSize(o.grain),
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
    const std::string ratio = i == 0 ? "" : Ratio(s.ratio, s.ratio_low, s.ratio_high);
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
                     Ratio(r.data_reduction, r.data_reduction_low, r.data_reduction_high));
  out += fmt::format("overall (used / after protection):      {}\n",
                     Ratio(r.overall, r.overall_low, r.overall_high));
  return out;
}

nlohmann::json SpaceJson(const SpaceReport& r, const SpaceOptions& o,
                         const std::vector<SpaceImage>& images) {
  nlohmann::json steps = nlohmann::json::array();
  for (const SpaceStep& s : r.steps) {
    steps.push_back({{"step", s.key}, {"label", s.label}, {"bytes", s.bytes}, {"ratio", s.ratio}});
    if (r.confidence > 0) {
      steps.back().update({{"bytes_low", s.bytes_low},
                           {"bytes_high", s.bytes_high},
                           {"ratio_low", s.ratio_low},
                           {"ratio_high", s.ratio_high}});
    }
  }
  nlohmann::json imgs = nlohmann::json::array();
  for (const SpaceImage& i : images) {
    imgs.push_back({{"name", i.name},
                    {"spec", i.spec},
                    {"size_bytes", i.size},
                    {"used_bytes", i.used_bytes()}});
  }
  const SpaceCounts& c = r.counts;
  nlohmann::json j = {{"mode", ModeName(o)},
                      {"options",
                       {{"scope", ScopeName(o)},
                        {"grain", o.grain},
                        {"dedup", o.dedup},
                        {"codec", o.compress ? "zstd:" + std::to_string(o.level) : "none"},
                        {"rule", FormatSizeRule(o.rule)},
                        {"protection", o.protection},
                        {"protection_factor", ProtectionFactor(o.protection)},
                        {"checksum", o.checksum}}},
                      {"images", imgs},
                      {"counts",
                       {{"provisioned_bytes", c.provisioned_bytes},
                        {"used_grains", c.used_grains},
                        {"zero_grains", c.zero_grains},
                        {"unique_grains", c.unique_grains},
                        {"compressed_bytes", c.compressed_bytes},
                        {"stored_bytes", c.stored_bytes},
                        {"metadata_bytes", c.metadata_bytes}}},
                      {"steps", steps},
                      {"data_reduction", r.data_reduction},
                      {"overall", r.overall}};
  if (r.confidence > 0) {
    j["confidence"] = r.confidence;
    j["data_reduction_low"] = r.data_reduction_low;
    j["data_reduction_high"] = r.data_reduction_high;
    j["overall_low"] = r.overall_low;
    j["overall_high"] = r.overall_high;
  }
  return j;
}

std::string ReplayPhysicalText(const ReplayPhysical& p) {
  return fmt::format(
      "\nphysical (replay): the layers hold the stored data in {} ({} B), the model {} ({} B): "
      "{:+.1f}%\n",
      FormatSize(p.physical_bytes), p.physical_bytes, FormatSize(p.modelled_bytes),
      p.modelled_bytes, p.difference() * 100);
}

nlohmann::json ReplayPhysicalJson(const ReplayPhysical& p) {
  return {{"modelled_bytes", p.modelled_bytes},
          {"physical_bytes", p.physical_bytes},
          {"difference_bytes", int64_t(p.physical_bytes) - int64_t(p.modelled_bytes)},
          {"difference", p.difference()}};
}

namespace {

// The vSAN scheme with the same raw factor as the pool's, for the "modelled" column.
std::string VsanCounterpart(const ceph::PoolUsage& p) {
  if (!p.erasure && p.size == 2) return "RAID-1, FTT=1";
  if (!p.erasure && p.size == 3) return "RAID-1, FTT=2";
  if (p.erasure && p.data_chunks == 3 && p.size == 4) return "RAID-5, 3+1";
  if (p.erasure && p.data_chunks == 4 && p.size == 6) return "RAID-6, 4+2";
  if (p.erasure && p.data_chunks == 2 && p.size == 3) return "RAID-5-like, 2+1";
  return "";
}

// The modelled and measured end-to-end ratio (logical / raw), for one pool.
struct EndToEnd {
  double modelled = 0, measured = 0;
};
EndToEnd EndToEndOf(const CephSpaceResult& r, const CephPoolMeasure& m, const SpaceOptions& o) {
  const SpaceReport report = BuildReport(r.counts, o);
  const uint64_t used = report.steps[1].bytes;  // "used": the images' written grains
  const uint64_t with_metadata = report.counts.stored_bytes + report.counts.metadata_bytes;
  EndToEnd e;
  const double raw = double(with_metadata) * m.modelled_factor();
  e.modelled = raw > 0 ? double(used) / raw : 0;
  e.measured = m.used_total() > 0 ? double(used) / double(m.used_total()) : 0;
  return e;
}

}  // namespace

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
    const double gap = m.modelled_factor() > 0 ? m.measured_factor() / m.modelled_factor() - 1 : 0;
    const EndToEnd e = EndToEndOf(r, m, o);
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

nlohmann::json CephMeasureJson(const CephSpaceResult& r, const SpaceOptions& o) {
  auto delta = [](const PoolDelta& d) {
    return nlohmann::json{{"stored", d.stored},           {"stored_data", d.stored_data},
                          {"stored_omap", d.stored_omap}, {"used", d.used},
                          {"used_data", d.used_data},     {"used_omap", d.used_omap},
                          {"objects", d.objects}};
  };
  nlohmann::json pools = nlohmann::json::array();
  for (const CephPoolMeasure& m : r.pools) {
    const EndToEnd e = EndToEndOf(r, m, o);
    nlohmann::json j = {
        {"pool", m.pool.name},
        {"scheme", m.pool.Scheme()},
        {"erasure", m.pool.erasure},
        {"size", m.pool.size},
        {"data_chunks", m.pool.data_chunks},
        {"stripe_unit", m.pool.stripe_unit},
        {"image", m.image},
        {"kept", m.kept},
        {"written_bytes", m.written_bytes},
        {"delta", delta(m.data)},
        {"measured_factor", m.measured_factor()},
        {"measured_data_factor", m.measured_data_factor()},
        {"modelled_factor", m.modelled_factor()},
        {"vsan_counterpart", VsanCounterpart(m.pool)},
        {"gap", m.modelled_factor() > 0 ? m.measured_factor() / m.modelled_factor() - 1 : 0.0},
        {"used_total", m.used_total()},
        {"measured_overall", e.measured},
        {"modelled_overall", e.modelled},
        {"why", ExplainGap(m, r.min_alloc_size)}};
    if (m.metadata_apart) j["metadata_pool_delta"] = delta(m.metadata);
    pools.push_back(std::move(j));
  }
  return {{"stack", r.layers.empty() ? "rbd" : r.layers + "+rbd"},
          {"logical_bytes", r.logical_bytes},
          {"min_alloc_size", r.min_alloc_size},
          {"pools", pools}};
}

namespace {

// A round tick step (1, 2 or 5 times a power of ten of a power of 1024, or the next power of
// 1024: 500 MiB, then 1 GiB, never 1000 MiB) for about 4 ticks to `max`.
uint64_t TickStep(uint64_t max) {
  const uint64_t raw = std::max<uint64_t>(1, max / 4);
  uint64_t unit = 1;
  while (unit * 1024 <= raw) unit *= 1024;
  uint64_t step = unit;
  for (uint64_t m : {1, 2, 5, 10, 20, 50, 100, 200, 500, 1024}) {
    step = m * unit;
    if (step >= raw) break;
  }
  return step;
}

}  // namespace

SpaceChartScale ChartScale(const SpaceReport& r, int plot_height) {
  SpaceChartScale sc;
  // Scale to the largest step after "provisioned", and cut the provisioned bar only when drawn
  // to scale it would crush the others below a third of the plot.
  uint64_t largest = 1;
  for (size_t i = 1; i < r.steps.size(); ++i) largest = std::max(largest, r.steps[i].bytes);
  const uint64_t provisioned = r.steps.empty() ? 0 : r.steps[0].bytes;
  sc.cut = provisioned > largest * 3;
  if (!sc.cut) largest = std::max(largest, provisioned);
  sc.step = TickStep(largest);
  sc.max = (largest + sc.step - 1) / sc.step * sc.step + sc.step / 2;  // headroom for labels
  // A cut bar stops 28 px below the top, so its labels fit above it; the axis has no tick above
  // that, so it never claims a value for the cut part. Uncut bars end below it (the headroom).
  sc.clip = sc.cut ? static_cast<uint64_t>(double(sc.max) * (1.0 - 28.0 / plot_height)) : sc.max;
  return sc;
}

std::string SpaceSvg(const SpaceReport& r, const SpaceOptions& o, size_t images) {
  const int W = 960, H = 540, left = 90, right = 30, top = 80, bottom = 120;
  const int plot_h = H - top - bottom;
  const size_t n = r.steps.size();
  const double slot = double(W - left - right) / double(n);
  const double bar_w = slot * 0.62;
  const SpaceChartScale scale = ChartScale(r, plot_h);
  const uint64_t step = scale.step, max = scale.max, clip = scale.clip;
  auto y = [&](uint64_t b) {
    return top + plot_h - double(std::min(b, clip)) / double(max) * plot_h;
  };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"DejaVu Sans, Arial, sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"30\" font-size=\"20\" font-weight=\"bold\">vstack space: savings factor "
      "by "
      "factor</text>\n",
      W, H, W, H, left);
  // The run's description, the estimate's sampling on a line of its own.
  std::string described = DescribeSpaceRun(o, images), sampling;
  if (const size_t at = described.find(", estimate ("); at != std::string::npos) {
    sampling = described.substr(at + 2);
    described.resize(at);
  }
  s += fmt::format("<text x=\"{}\" y=\"50\" font-size=\"12\" fill=\"#444\">{}</text>\n", left,
                   Escape(described));
  if (!sampling.empty()) {
    s += fmt::format("<text x=\"{}\" y=\"65\" font-size=\"12\" fill=\"#444\">{}</text>\n", left,
                     Escape(sampling));
  }
  for (uint64_t b = 0; b <= clip; b += step) {  // no tick where a cut bar is cut
    const double yy = y(b);
    s += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#e3e3e3\"/>\n"
        "<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\" "
        "fill=\"#555\">{}</text>\n",
        left, yy, W - right, yy, left - 6, yy + 4, Escape(FormatSize(b)));
  }
  for (size_t i = 0; i < n; ++i) {
    const SpaceStep& st = r.steps[i];
    const double x = left + slot * double(i) + (slot - bar_w) / 2;
    const uint64_t prev = i == 0 ? st.bytes : r.steps[i - 1].bytes;
    // The part carried over from the previous step, then the change on top of it: space saved
    // by this step (green, dashed: no longer there) or added by it (orange).
    const uint64_t carried = std::min(prev, st.bytes);
    const std::string color = i == 0 ? "#9aa5b1" : i == n - 1 ? "#3b6ea5" : "#6c9bd2";
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
        "fill=\"{}\"/>\n",
        x, y(carried), bar_w, top + plot_h - y(carried), color);
    if (prev > st.bytes) {
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
          "fill=\"#a8dcaa\" stroke=\"#3d8b40\" stroke-dasharray=\"4 3\"/>\n",
          x, y(prev), bar_w, y(st.bytes) - y(prev));
    } else if (prev < st.bytes) {
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
          "fill=\"#f0a04b\"/>\n",
          x, y(st.bytes), bar_w, y(prev) - y(st.bytes));
    }
    if (std::max(prev, st.bytes) > clip) {
      // The bar is cut: a white zigzag says it goes on.
      s += fmt::format(
          "<path d=\"M{:.1f},{:.1f} l{:.1f},-8 l{:.1f},8 l{:.1f},-8 l{:.1f},8\" "
          "stroke=\"white\" stroke-width=\"4\" fill=\"none\"/>\n",
          x, y(clip) + 16, bar_w / 4, bar_w / 4, bar_w / 4, bar_w / 4);
    }
    if (st.bytes_low != st.bytes_high) {
      // The step's interval: an error bar over the top of the bar.
      const double cx = x + bar_w / 2, y1 = y(st.bytes_low), y2 = y(st.bytes_high);
      s += fmt::format(
          "<path d=\"M{:.1f},{:.1f} V{:.1f} M{:.1f},{:.1f} h{:.1f} M{:.1f},{:.1f} "
          "h{:.1f}\" stroke=\"#b22222\" stroke-width=\"1.5\" fill=\"none\"/>\n",
          cx, y1, y2, cx - 6, y1, 12.0, cx - 6, y2, 12.0);
    }
    const double label_y = std::min({y(prev), y(st.bytes), y(st.bytes_high)}) - 20;
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\" "
        "font-weight=\"bold\">{}</text>\n",
        x + bar_w / 2, label_y, Escape(FormatSize(st.bytes)));
    if (i > 0) {
      s += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\" "
          "fill=\"#333\">{:.2f}x</text>\n",
          x + bar_w / 2, label_y + 13, st.ratio);
      if (fmt::format("{:.2f}", st.ratio_low) != fmt::format("{:.2f}", st.ratio_high)) {
        s += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"middle\" "
            "fill=\"#b22222\">{:.2f}\u2013{:.2f}</text>\n",
            x + bar_w / 2, label_y - 14, st.ratio_low, st.ratio_high);
      }
    }
    // The step's name under the axis, wrapped at spaces into lines of about 16 characters.
    std::vector<std::string> lines(1);
    std::string word;
    for (char c : st.label + " ") {
      if (c != ' ') {
        word += c;
        continue;
      }
      if (!lines.back().empty() && lines.back().size() + word.size() > 16) lines.emplace_back();
      lines.back() += (lines.back().empty() ? "" : " ") + word;
      word.clear();
    }
    for (size_t k = 0; k < lines.size(); ++k) {
      s += fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}"
          "</text>\n",
          x + bar_w / 2, top + plot_h + 18 + 14 * k, Escape(lines[k]));
    }
  }
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n", left,
                   top + plot_h, W - right, top + plot_h);
  // Legend, then the two ratios on a line of their own.
  const int ly = H - 40;
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"12\" fill=\"#a8dcaa\" stroke=\"#3d8b40\" "
      "stroke-dasharray=\"4 3\"/><text x=\"{}\" y=\"{}\" font-size=\"12\">saved by the "
      "step</text>\n"
      "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"12\" fill=\"#f0a04b\"/><text x=\"{}\" "
      "y=\"{}\" "
      "font-size=\"12\">added by the step</text>\n"
      "<text x=\"{}\" y=\"{}\" font-size=\"12\">data reduction {} (used / with metadata), "
      "overall {} (used / after protection)</text>\n",
      left, ly - 10, left + 20, ly, left + 160, ly - 10, left + 180, ly, left, ly + 22,
      Escape(Ratio(r.data_reduction, r.data_reduction_low, r.data_reduction_high)),
      Escape(Ratio(r.overall, r.overall_low, r.overall_high)));
  if (r.confidence > 0) {
    s += fmt::format(
        "<path d=\"M{},{} v12 M{},{} h10 M{},{} h10\" stroke=\"#b22222\" "
        "stroke-width=\"1.5\"/><text x=\"{}\" y=\"{}\" font-size=\"12\">{:g}% "
        "interval of the estimate</text>\n",
        left + 335, ly - 10, left + 330, ly - 10, left + 330, ly + 2, left + 350, ly,
        r.confidence * 100);
  }
  s += "</svg>\n";
  return s;
}

}  // namespace vstack::cli
