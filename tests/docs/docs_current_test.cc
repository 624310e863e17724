// The documentation describes the build it ships with: no page says that a component this
// build registers (a backend, layer or image format) is not implemented, not supported yet or
// missing. Such words go stale the day the component lands (docs/layers/vhd.md said "VHDX is
// not implemented" long after the vhdx layer was in).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "lib/registry.h"

namespace vstack {
namespace {

namespace fs = std::filesystem;

// The lines of `text` that call `name` unimplemented, as "LINE: text" (case-insensitive).
std::vector<std::string> StaleClaimsAbout(const std::string& name, const std::string& text) {
  // The component as the subject of its sentence: "VHDX is not implemented", not "differencing
  // VHDX is not supported" (a part of it that is not).
  const std::regex stale("(^|[*.;:(]\\s*)" + name +
                             "\\b( \\w+)? (is|are) (not (yet )?(implemented|supported|available)|"
                             "missing|unimplemented)",
                         std::regex::icase);
  std::vector<std::string> found;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (std::regex_search(line, stale)) found.push_back(std::to_string(n) + ": " + line);
  }
  return found;
}

TEST(DocsCurrent, CheckerFindsStaleClaims) {
  EXPECT_EQ(StaleClaimsAbout("vhdx", "* VHDX is not implemented. Chains: see below").size(), 1u);
  EXPECT_EQ(StaleClaimsAbout("zstd", "zstd compression is not yet supported").size(), 1u);
  EXPECT_TRUE(
      StaleClaimsAbout("vhdx", "Differencing VHDX is refused; VHDX has no parents").empty());
  EXPECT_TRUE(
      StaleClaimsAbout("vhdx", "HasParent, refused: differencing VHDX is not supported)").empty());
  EXPECT_TRUE(StaleClaimsAbout("vhd", "VHDX is not implemented").empty()) << "whole words";
}

TEST(DocsCurrent, NoPageCallsARegisteredComponentUnimplemented) {
  std::vector<std::string> problems;
  for (auto it = fs::recursive_directory_iterator(VSTACK_SOURCE_DIR);
       it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name.rfind("build", 0) == 0 || name[0] == '.')) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() || it->path().extension() != ".md") continue;
    std::ifstream f(it->path());
    std::stringstream text;
    text << f.rdbuf();
    for (const ComponentInfo* c : Registry::Global().All()) {
      for (const std::string& line : StaleClaimsAbout(c->name, text.str())) {
        problems.push_back(it->path().string() + ":" + line);
      }
    }
  }
  std::string all;
  for (const std::string& p : problems) all += p + "\n";
  EXPECT_TRUE(problems.empty()) << "pages that call a component of this build unimplemented:\n"
                                << all;
}

}  // namespace
}  // namespace vstack
