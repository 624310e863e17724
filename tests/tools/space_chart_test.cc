// `vstack space`'s chart and header: the provisioned bar is cut only when it would crush the
// others, the axis never claims less than a bar's label, the header reads "codec zstd:1, rule
// vsan-osa", and --scope groups=N with N >= the number of images says it is per-image scope.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "analysis/space/space_render.h"
#include "tests/testing/test_util.h"

namespace vstack::cli {
namespace {

SpaceReport Report(uint64_t provisioned, uint64_t used) {
  SpaceReport r;
  r.steps = {{"provisioned", "provisioned", provisioned, 1},
             {"used", "used before (written)", used, double(provisioned) / double(used)},
             {"after_zero", "after zero elimination", used * 9 / 10, 1.1},
             {"protection", "after protection", used * 6 / 5, 0.75}};
  return r;
}

// The number of zigzags (the only <path>s in the chart): one per cut bar.
int Zigzags(const std::string& svg) {
  int n = 0;
  for (size_t at = svg.find("<path"); at != std::string::npos; at = svg.find("<path", at + 1)) ++n;
  return n;
}

TEST(SpaceChart, ABarOnly45PercentTallerIsDrawnToScale) {
  const SpaceReport r = Report(uint64_t{1450} << 20, uint64_t{1000} << 20);
  const SpaceChartScale s = ChartScale(r, 340);
  EXPECT_FALSE(s.cut);
  // The top tick is at or above every bar, the provisioned one included.
  const uint64_t top_tick = s.max / s.step * s.step;
  EXPECT_GE(top_tick, r.steps[0].bytes);
  SpaceOptions o;
  EXPECT_EQ(Zigzags(SpaceSvg(r, o, 3)), 0);
}

TEST(SpaceChart, ABarThatWouldCrushTheOthersIsCutBelowTheTopTick) {
  const SpaceReport r = Report(uint64_t{10} << 30, uint64_t{1} << 30);
  const SpaceChartScale s = ChartScale(r, 340);
  EXPECT_TRUE(s.cut);
  EXPECT_LT(s.clip, r.steps[0].bytes);
  for (size_t i = 1; i < r.steps.size(); ++i) EXPECT_LT(r.steps[i].bytes, s.clip) << i;
  SpaceOptions o;
  const std::string svg = SpaceSvg(r, o, 3);
  EXPECT_EQ(Zigzags(svg), 2);  // provisioned, and the saving of the step after it
  // No tick above the cut: the highest tick value is at most the clip value.
  static const std::regex kTick(R"(text-anchor="end" fill="#555">([0-9.]+) (B|KiB|MiB|GiB)<)");
  double highest = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), kTick), end; it != end; ++it) {
    const std::string unit = (*it)[2];
    const double scale = unit == "GiB"   ? 1 << 30
                         : unit == "MiB" ? 1 << 20
                         : unit == "KiB" ? 1024
                                         : 1;
    highest = std::max(highest, std::stod((*it)[1]) * scale);
  }
  EXPECT_GT(highest, 0);
  EXPECT_LE(highest, double(s.clip));
}

TEST(SpaceChart, HeaderSeparatesCodecAndRule) {
  SpaceOptions o;
  const std::string d = DescribeSpaceRun(o, 3);
  EXPECT_NE(d.find("codec zstd:1, rule vsan-osa, "), std::string::npos) << d;
}

TEST(SpaceChart, MoreGroupsThanImagesSaysItIsImageScope) {
  testing::TempDir dir;
  std::string images;
  for (int i = 0; i < 3; ++i) {
    testing::WriteFile(dir.File("vm" + std::to_string(i)), 1 << 20, static_cast<unsigned char>(i));
    images += " " + dir.File("vm" + std::to_string(i));
  }
  testing::CommandResult r = testing::RunVstack("space --scope groups=5" + images);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("vstack space: note: --scope groups=5 with 3 images puts every image "
                          "in a group of its own, which is the same as --scope image"),
            std::string::npos)
      << r.output;
  testing::CommandResult json = testing::RunVstack("space --output=json --scope groups=5" + images);
  ASSERT_EQ(json.status, 0) << json.output;
  const nlohmann::json doc = nlohmann::json::parse(json.output);  // nothing else on the streams
  ASSERT_EQ(doc["notes"].size(), 1u);
  EXPECT_NE(doc["notes"][0].get<std::string>().find("same as --scope image"), std::string::npos);
  testing::CommandResult two = testing::RunVstack("space --scope groups=2" + images);
  EXPECT_EQ(two.status, 0);
  EXPECT_EQ(two.output.find("note:"), std::string::npos) << two.output;
}

// An image whose size is not a multiple of the grain: its last grain counts whole, so "used"
// exceeded "provisioned" (1,003,520 against 1,000,448 bytes) with nothing to say why. Now a
// note says it, in the text (stderr) and in JSON; an image of whole grains gets none.
TEST(SpaceChart, AnImageOfPartGrainsSaysItsLastGrainCountsWhole) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("odd.raw"), 1000448, 7);
  testing::WriteFile(dir.File("even.raw"), 1 << 20, 7);
  testing::CommandResult r = testing::RunVstack("space " + dir.File("odd.raw"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("vstack space: note: " + dir.File("odd.raw") +
                          " (1000448 bytes): its size is not a multiple of the 4 KiB grain, and "
                          "the last grain counts whole"),
            std::string::npos)
      << r.output;
  testing::CommandResult json = testing::RunVstack("space --output=json " + dir.File("odd.raw"));
  ASSERT_EQ(json.status, 0) << json.output;
  const nlohmann::json doc = nlohmann::json::parse(json.output);
  ASSERT_EQ(doc["notes"].size(), 1u);
  EXPECT_NE(doc["notes"][0].get<std::string>().find("can exceed \"provisioned\""),
            std::string::npos);
  EXPECT_GT(doc["steps"][1]["bytes"].get<uint64_t>(), doc["steps"][0]["bytes"].get<uint64_t>());
  testing::CommandResult even = testing::RunVstack("space " + dir.File("even.raw"));
  EXPECT_EQ(even.status, 0);
  EXPECT_EQ(even.output.find("note:"), std::string::npos) << even.output;
}

}  // namespace
}  // namespace vstack::cli
