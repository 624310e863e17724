// The SVG waterfall of a vstack space report (space_render.h), written by hand.
#include <fmt/format.h>

#include <algorithm>

#include "analysis/space/space_render.h"
#include "lib/size.h"
#include "lib/xml_escape.h"

namespace vstack {
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
                   XmlEscape(described));
  if (!sampling.empty()) {
    s += fmt::format("<text x=\"{}\" y=\"65\" font-size=\"12\" fill=\"#444\">{}</text>\n", left,
                     XmlEscape(sampling));
  }
  for (uint64_t b = 0; b <= clip; b += step) {  // no tick where a cut bar is cut
    const double yy = y(b);
    s += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#e3e3e3\"/>\n"
        "<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\" "
        "fill=\"#555\">{}</text>\n",
        left, yy, W - right, yy, left - 6, yy + 4, XmlEscape(FormatSize(b)));
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
        x + bar_w / 2, label_y, XmlEscape(FormatSize(st.bytes)));
    if (i > 0) {
      s += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\" "
          "fill=\"#333\">{}x</text>\n",
          x + bar_w / 2, label_y + 13, SpaceRatioNumber(st.ratio));
      if (SpaceRatioNumber(st.ratio_low) != SpaceRatioNumber(st.ratio_high)) {
        s += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"middle\" "
            "fill=\"#b22222\">{}\u2013{}</text>\n",
            x + bar_w / 2, label_y - 14, SpaceRatioNumber(st.ratio_low),
            SpaceRatioNumber(st.ratio_high));
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
          x + bar_w / 2, top + plot_h + 18 + 14 * k, XmlEscape(lines[k]));
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
      XmlEscape(SpaceRatioText(r.data_reduction, r.data_reduction_low, r.data_reduction_high)),
      XmlEscape(SpaceRatioText(r.overall, r.overall_low, r.overall_high)));
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

std::string SpaceRunSvg(const SpaceRun& run) {
  return SpaceSvg(run.report, run.options, run.image_count);
}

}  // namespace vstack
