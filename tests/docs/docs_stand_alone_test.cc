// The documentation stands alone: no page (README.md, docs/, any *.md in the repository) points
// readers at files that exist only on a build machine — the engineers' background notes under
// ../shared, or an absolute path into a home or work directory. A fact a page relies on is
// carried into the page with its public source instead.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace vstack {
namespace {

namespace fs = std::filesystem;

// The lines of `text` that reference a machine-local path, as "LINE: text".
std::vector<std::string> MachinePathsIn(const std::string& text) {
  // ../shared (any depth), absolute paths into /work, /home or /root, and the notes by name.
  static const std::regex kBad(
      R"((\.\./)+shared\b|(^|[\s`'"(=:])/(work|home|root)/|\b(BENCH|SPACE|VHD)-NOTES\b|DESIGN-GUIDE)");
  std::vector<std::string> found;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (std::regex_search(line, kBad)) found.push_back(std::to_string(n) + ": " + line);
  }
  return found;
}

TEST(DocsStandAlone, CheckerFindsMachinePaths) {
  EXPECT_EQ(MachinePathsIn("see `/work/shared/docs/BENCH-NOTES.md`\n").size(), 1u);
  EXPECT_EQ(MachinePathsIn("ok\nsee ../../shared/docs/x.md\n"),
            std::vector<std::string>{"2: see ../../shared/docs/x.md"});
  EXPECT_EQ(MachinePathsIn("(SPACE-NOTES §4.2)").size(), 1u);
  EXPECT_EQ(MachinePathsIn("cd /home/me/vstack").size(), 1u);
  // Example paths in commands are fine: /var/tmp, /tmp, /dev/shm, and words like "shared".
  EXPECT_TRUE(MachinePathsIn("vhd+file:/var/tmp/d.vhd /tmp/x /dev/shm/a\n"
                             "the shared build machine; shared_ptr; a/work/b\n")
                  .empty());
}

TEST(DocsStandAlone, NoDocReferencesMachinePaths) {
  const fs::path root = VSTACK_SOURCE_DIR;
  std::vector<std::string> problems;
  size_t pages = 0;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name.rfind("build", 0) == 0 || name[0] == '.')) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() || it->path().extension() != ".md") continue;
    ++pages;
    std::ifstream f(it->path());
    std::stringstream text;
    text << f.rdbuf();
    for (const std::string& line : MachinePathsIn(text.str())) {
      problems.push_back(fs::relative(it->path(), root).string() + ":" + line);
    }
  }
  EXPECT_GE(pages, 10u) << "the walk found too few pages under " << root;
  std::string all;
  for (const std::string& p : problems) all += "\n  " + p;
  EXPECT_TRUE(problems.empty())
      << "pages point at files readers do not have; carry the fact over with its public "
         "source instead:"
      << all;
}

}  // namespace
}  // namespace vstack
