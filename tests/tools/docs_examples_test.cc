// Every example command in README.md and docs/ runs as written and exits as the docs say. A
// command is a line of a fenced block that starts with `vstack CMD`, `build/vstack CMD` or
// `$ vstack CMD` (CMD a subcommand; "vstack info: ..." is output), with its `\` continuations.
// Each file's commands run in order in a fresh directory holding the images the docs assume
// (vm1.img, vm2.vhd, ds-docs/, ds-small/, small/, host1/ to host3/), with /var/tmp/ and /tmp/
// pointing there.
// Commands that cannot run in a test are listed below with the reason; none is skipped silently,
// and a listed exception that matches no command fails the test (the list cannot go stale).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/test_util.h"

namespace vstack {
namespace {

namespace fs = std::filesystem;

struct Example {
  std::string file;     // relative to the source tree
  std::string command;  // as written, continuations joined, comment removed
};

// How a command is expected to end: with `status`, or not run, for `skip`.
struct Expectation {
  std::string file;    // "" for any file
  std::string prefix;  // the command starts with this
  int status = 0;
  std::string skip;
};

const std::vector<Expectation>& Expectations() {
  static const std::vector<Expectation> kList = {
      {"", "vstack bench", 0,
       "a benchmark: seconds to minutes per stack and round on real files (tests/bench runs "
       "short ones)"},
      {"", "vstack serve --socket", 0,
       "a server runs until it is stopped (tests/nbd starts and stops it)"},
      {"docs/layers/nbd.md", "vstack serve [", 0, "a synopsis, not a command"},
      {"docs/testing.md", "vstack sim --preset families --regressions", 0,
       "the CI campaign: 400 seeds, about a minute (ctest entry sim_campaign runs it)"},
      {"docs/testing.md", "vstack sim --preset grain --seed-from 1 --seeds 200", 0,
       "the CI campaign's grain run: 200 seeds (ctest entry sim_campaign_grain runs it)"},
      {"docs/testing.md", "vstack sim --preset all --seed-from random --seeds 200", 0,
       "the CI campaign's fresh seeds (ctest entry sim_campaign_fresh runs it)"},
      {"docs/testing.md", "vstack sim --preset all --seed-from 1000000", 0,
       "the long campaign: 100,000 seeds, about an hour of CPU"},
      {"", "vstack space --mode=ceph", 0,
       "needs a Ceph cluster with BlueStore OSDs and a mgr (tests/ceph/ceph_space_test.cc, "
       "ctest entry ceph-space, runs it)"},
      {"docs/space-savings.md", "vstack space --output=json [KNOB]", 0, "a placeholder, [KNOB]"},
      {"docs/space-savings.md", "vstack space --scope=image --rule=packed ...", 0,
       "a placeholder, ..."},
      {"docs/space-savings.md", "vstack space --scope=groups=2 --rule=sector", 0,
       "a placeholder, ..."},
      {"docs/space-savings.md", "vstack space --rule=min-saving=12.5 --protection=raid5 ...", 0,
       "a placeholder, ..."},
      {"docs/stack-spec.md", "vstack info nosuch+memory:1M", 2, ""},
      {"docs/stack-spec.md", "vstack info vhdd+memory:1M", 2, ""},
      {"docs/stack-spec.md", "vstack info 'dedup:grain=3K+memory:64M'", 2, ""},
      {"docs/stack-spec.md", "vstack info 'dedup:verify=+memory:64M'", 2, ""},
      {"docs/stack-spec.md", "vstack info memory:1M,colour=red", 2, ""},
      {"docs/stack-spec.md", "vstack info passthrough", 2, ""},
      {"docs/cli.md", "vstack info --output=yaml", 2, ""},
      {"docs/cli.md", "vstack map --output jsn", 2, ""},
      {"docs/cli.md", "vstack convert /var/tmp/d.vhd /var/tmp/d.raw", 1, ""},
      {"docs/cli.md", "vstack compare -s", 1, ""},
  };
  return kList;
}

std::vector<std::string> DocFiles() {
  const fs::path root = VSTACK_SOURCE_DIR;
  std::vector<std::string> files = {"README.md"};
  for (const char* dir : {"docs", "docs/layers"}) {
    for (const auto& e : fs::directory_iterator(root / dir)) {
      if (e.path().extension() == ".md") files.push_back(fs::relative(e.path(), root).string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Example> Examples(const std::string& file) {
  std::ifstream in(fs::path(VSTACK_SOURCE_DIR) / file);
  static const std::regex kCommand(
      R"(^(\$ )?(build/)?vstack (bench|info|layers|create|check|convert|compare|map|compact|space|sim|serve|help|completion)( .*)?$)");
  std::vector<Example> out;
  bool fenced = false;
  std::string pending;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      continue;
    }
    if (!fenced) continue;
    if (pending.empty()) {
      std::smatch m;
      if (!std::regex_match(line, m, kCommand)) continue;
      line = "vstack " + m[3].str() + m[4].str();
    }
    const bool continues = !line.empty() && line.back() == '\\';
    if (continues) line.pop_back();
    pending += line;
    if (continues) continue;
    if (const size_t hash = pending.find(" #"); hash != std::string::npos) pending.resize(hash);
    while (!pending.empty() && pending.back() == ' ') pending.pop_back();
    out.push_back({file, pending});
    pending.clear();
  }
  return out;
}

const Expectation* Find(const Example& e) {
  for (const Expectation& x : Expectations()) {
    if ((x.file.empty() || x.file == e.file) && e.command.rfind(x.prefix, 0) == 0) return &x;
  }
  return nullptr;
}

// The images the examples assume: two small VM images in the directory, and datasets.
void Prepare(const std::string& dir) {
  const std::string vstack = VSTACK_CLI;
  testing::WriteFile(dir + "/vm1.img", 4 << 20, 0x11);
  ASSERT_EQ(testing::RunCommand(vstack + " convert -O vhd " + dir + "/vm1.img " + dir + "/vm2.vhd")
                .status,
            0);
  for (const char* set : {"ds-docs", "ds-small", "small", "host1", "host2", "host3"}) {
    fs::create_directory(dir + "/" + set);
    testing::WriteFile(dir + "/" + set + "/vm01.img", 2 << 20, 0x22);
    testing::WriteFile(dir + "/" + set + "/vm02.img", 2 << 20, 0);
  }
}

std::string Rewrite(const std::string& command, const std::string& dir) {
  std::string out = VSTACK_CLI;
  for (size_t at = 6; at < command.size();) {  // after "vstack"
    bool replaced = false;
    for (const std::string from : {"/var/tmp/", "/tmp/"}) {
      if (command.compare(at, from.size(), from) == 0) {
        out += dir + "/";
        at += from.size();
        replaced = true;
        break;
      }
    }
    if (!replaced) out += command[at++];
  }
  return out;
}

TEST(DocsExamples, EveryExampleCommandRunsAsDocumented) {
  std::vector<const Expectation*> used;
  size_t ran = 0;
  for (const std::string& file : DocFiles()) {
    const std::vector<Example> examples = Examples(file);
    if (examples.empty()) continue;
    testing::TempDir dir;
    Prepare(dir.path());
    for (const Example& e : examples) {
      const Expectation* x = Find(e);
      if (x != nullptr) used.push_back(x);
      if (x != nullptr && !x->skip.empty()) {
        std::printf("not run: %s: %s\n  (%s)\n", file.c_str(), e.command.c_str(), x->skip.c_str());
        continue;
      }
      const int want = x ? x->status : 0;
      testing::CommandResult r =
          testing::RunCommand("cd '" + dir.path() + "' && " + Rewrite(e.command, dir.path()));
      EXPECT_EQ(r.status, want) << file << ": " << e.command << "\n" << r.output;
      ++ran;
    }
  }
  for (const Expectation& x : Expectations()) {
    EXPECT_NE(std::find(used.begin(), used.end(), &x), used.end())
        << "no example matches the listed " << (x.file.empty() ? "" : x.file + ": ") << x.prefix;
  }
  EXPECT_GE(ran, 15u);
  std::printf("ran %zu example commands\n", ran);
}

}  // namespace
}  // namespace vstack
