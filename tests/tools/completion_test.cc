// `vstack completion bash`, sourced into a real bash and asked to complete partial command
// lines: subcommands, options, option choices, bench presets and the layer names of a spec, all
// from the same tables vstack itself uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/test_util.h"

namespace vstack {
namespace {

class Completion : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::HaveProgram("bash"));
    testing::CommandResult script = testing::RunVstack("completion bash");
    ASSERT_EQ(script.status, 0) << script.output;
    std::ofstream(dir_.File("vstack.bash")) << script.output;
  }

  // The completions bash offers for `line` (the cursor at its end), space-separated.
  std::string Complete(const std::string& line) {
    std::ofstream(dir_.File("run.sh")) << "source " << dir_.File("vstack.bash") << "\n"
                                       << "COMP_LINE='" << line << "'; COMP_POINT=${#COMP_LINE}\n"
                                       << "_vstack\n"
                                       << "echo \"${COMPREPLY[*]}\"\n";
    testing::CommandResult r = testing::RunCommand("bash " + dir_.File("run.sh"));
    EXPECT_EQ(r.status, 0) << r.output;
    if (!r.output.empty() && r.output.back() == '\n') r.output.pop_back();
    return r.output;
  }

  testing::TempDir dir_;
};

TEST_F(Completion, CommandsOptionsAndChoices) {
  EXPECT_EQ(Complete("vstack in"), "info");
  EXPECT_EQ(Complete("vstack co"), "convert compare compact commit completion");
  EXPECT_EQ(Complete("vstack info --ou"), "--output");
  EXPECT_EQ(Complete("vstack info --output "), "text json");
  EXPECT_EQ(Complete("vstack check -r "), "leaks all");
  EXPECT_EQ(Complete("vstack help se"), "serve");
  EXPECT_EQ(Complete("vstack bench --no-rep"), "--no-report");
  EXPECT_EQ(Complete("vstack convert --over"), "--overwrite");
  EXPECT_EQ(Complete("vstack bench --bs "), "");  // a value of its own
  EXPECT_EQ(Complete("vstack create -f "), "raw vhd vhdx vpc");
  EXPECT_EQ(Complete("vstack create -f vh"), "vhd vhdx");
  EXPECT_EQ(Complete("vstack convert -O "), "raw vhd vhdx vpc");
  EXPECT_EQ(Complete("vstack bench --pattern "), "random sequential");
  EXPECT_EQ(Complete("vstack bench --content "), "random zeros pattern");
  const std::string presets = Complete("vstack bench --preset ");
  EXPECT_NE(presets.find("hyperv-passthrough"), std::string::npos) << presets;
  EXPECT_EQ(presets.find("vhd-fixed"), std::string::npos) << "--stack's presets: " << presets;
}

// A preset that is also a spec (dedup+zstd) is offered once.
TEST_F(Completion, EachWordOnce) {
  for (const char* line : {"vstack bench --stack dedup+", "vstack bench --stack dedup+zs"}) {
    std::istringstream words(Complete(line));
    std::vector<std::string> seen;
    for (std::string w; words >> w;) {
      EXPECT_EQ(std::count(seen.begin(), seen.end(), w), 0) << line << ": " << w << " twice";
      seen.push_back(w);
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), "dedup+zstd"), 1) << line;
  }
}

TEST_F(Completion, PresetsAndSpecLayerNames) {
  const std::string presets = Complete("vstack bench --stack vhd-");
  EXPECT_NE(presets.find("vhd-fixed"), std::string::npos) << presets;
  EXPECT_NE(presets.find("vhd-dynamic"), std::string::npos) << presets;
  EXPECT_EQ(Complete("vstack info pass"), "passthrough");
  EXPECT_EQ(Complete("vstack info dedup+zs"), "dedup+zstd");
  // sim's --stack takes layers too (it offered nothing).
  EXPECT_EQ(Complete("vstack sim --stack dedup+zs"), "dedup+zstd");
  // Bash splits at ':' and '=': only the part after them is replaced.
  EXPECT_EQ(Complete("vstack info zstd:level=1+passth"), "1+passthrough");
  const std::string backends = Complete("vstack info vhd+");
  for (const char* name : {"vhd+file", "vhd+memory", "vhd+uring"}) {
    EXPECT_NE(backends.find(name), std::string::npos) << backends;
  }
  // The layer names are those `vstack layers --output=json` lists.
  testing::CommandResult layers = testing::RunVstack("layers --output=json");
  ASSERT_EQ(layers.status, 0);
  const std::string all = Complete("vstack info ");
  for (const auto& c : nlohmann::json::parse(layers.output)) {
    EXPECT_NE(all.find(c["name"].get<std::string>()), std::string::npos) << all;
  }
}

}  // namespace
}  // namespace vstack
