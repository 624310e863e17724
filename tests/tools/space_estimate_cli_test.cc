// `vstack space --estimate` and `vstack space merge` as a user runs them: every step carries an
// interval that holds the exact scan's value, a full sample is the exact scan, the estimate
// reads only its sample without dedup, sketches from several "hosts" (directories) merge into
// the sketch of the union, and bad sketches or options fail clearly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/testing/test_util.h"

namespace vstack {
namespace {

using testing::RunVstack;
using testing::TempDir;

void PutAt(const std::string& path, uint64_t size, uint64_t offset, const std::vector<char>& data) {
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
  ASSERT_EQ(::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(data.size()));
  ::close(fd);
}

// Text-like grains of varying compressibility: words, with a random run in some grains.
std::vector<char> Mixed(uint64_t seed, size_t n) {
  static const char* kWords[] = {"select ", "from ", "where ", "vstack ", "grain ", "index "};
  testing::Rng rng(seed);
  std::vector<char> out;
  while (out.size() < n) {
    if (out.size() % 4096 == 0 && rng.Below(3) == 0) {
      const size_t run = 512 + rng.Below(3500);
      for (size_t i = 0; i < run; ++i) out.push_back(static_cast<char>(rng.Next()));
    }
    for (const char* w = kWords[rng.Below(6)]; *w; ++w) out.push_back(*w);
  }
  out.resize(n);
  return out;
}

nlohmann::json Json(const std::string& args) {
  testing::CommandResult r = RunVstack(args + " --output=json");
  EXPECT_EQ(r.status, 0) << args << "\n" << r.output;
  try {
    return nlohmann::json::parse(r.output);
  } catch (...) {
    ADD_FAILURE() << "not JSON: " << r.output;
    return {};
  }
}

std::string Slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class SpaceEstimateCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    // Two "hosts" with two VMs each: a shared template, each VM's own data, written zeros.
    const auto shared = Mixed(1, 6 << 20);
    for (int h = 0; h < 2; ++h) {
      std::filesystem::create_directory(dir_.File("host" + std::to_string(h)));
      for (int v = 0; v < 2; ++v) {
        const std::string p =
            dir_.File("host" + std::to_string(h) + "/vm" + std::to_string(v) + ".img");
        PutAt(p, 64 << 20, 0, shared);
        PutAt(p, 64 << 20, 16 << 20, Mixed(10 + 2 * h + v, 4 << 20));
        PutAt(p, 64 << 20, 24 << 20, std::vector<char>(1 << 20, 0));
        host_[h] += " " + p;
      }
    }
  }
  TempDir dir_;
  std::string host_[2];
};

TEST_F(SpaceEstimateCommand, EveryStepsIntervalHoldsTheExactValue) {
  const std::string all = host_[0] + host_[1];
  const nlohmann::json exact = Json("space" + all);
  const nlohmann::json est = Json("space --estimate --fraction 25%" + all);
  EXPECT_EQ(est["mode"], "estimate");
  EXPECT_DOUBLE_EQ(est["confidence"].get<double>(), 0.95);
  ASSERT_EQ(est["steps"].size(), exact["steps"].size());
  for (size_t i = 0; i < exact["steps"].size(); ++i) {
    const auto &e = exact["steps"][i], &s = est["steps"][i];
    EXPECT_LE(s["bytes_low"].get<uint64_t>(), e["bytes"].get<uint64_t>()) << s;
    EXPECT_GE(s["bytes_high"].get<uint64_t>(), e["bytes"].get<uint64_t>()) << s;
    EXPECT_LE(s["ratio_low"].get<double>(), e["ratio"].get<double>() * (1 + 1e-9)) << s;
    EXPECT_GE(s["ratio_high"].get<double>(), e["ratio"].get<double>() * (1 - 1e-9)) << s;
  }
  // Used and zero grains are counted exactly; dedup and compression are estimated.
  EXPECT_EQ(est["steps"][1]["bytes_low"], est["steps"][1]["bytes_high"]);
  EXPECT_EQ(est["steps"][2]["bytes"], exact["steps"][2]["bytes"]);
  EXPECT_LT(est["steps"][3]["ratio_low"], est["steps"][3]["ratio_high"]);
  EXPECT_LT(est["steps"][4]["ratio_low"], est["steps"][4]["ratio_high"]);
  const auto& cost = est["estimate"];
  EXPECT_EQ(cost["bytes_covered"], exact["counts"]["used_grains"].get<uint64_t>() * 4096);
  EXPECT_EQ(cost["bytes_hashed"], cost["bytes_read"]);
  EXPECT_LT(cost["bytes_compressed"].get<uint64_t>(), cost["bytes_covered"].get<uint64_t>() / 2);
  EXPECT_LE(cost["sample_fingerprints"].get<uint64_t>(), cost["peak_fingerprints"].get<uint64_t>());

  // The text and the chart carry the intervals too.
  const std::string svg = dir_.File("est.svg");
  testing::CommandResult t = RunVstack("space --estimate --fraction 25% --svg " + svg + all);
  ASSERT_EQ(t.status, 0) << t.output;
  EXPECT_NE(t.output.find("95% interval"), std::string::npos) << t.output;
  const size_t dedup_line = t.output.find("after dedup");
  ASSERT_NE(dedup_line, std::string::npos) << t.output;
  EXPECT_NE(t.output.substr(dedup_line, t.output.find('\n', dedup_line) - dedup_line).find("x ("),
            std::string::npos)
      << t.output;
  EXPECT_NE(t.output.find("estimate: covered"), std::string::npos) << t.output;
  EXPECT_NE(Slurp(svg).find("95% interval of the estimate"), std::string::npos);
}

TEST_F(SpaceEstimateCommand, AFullSampleIsTheExactScan) {
  const std::string all = host_[0] + host_[1];
  const nlohmann::json exact = Json("space --rule=packed" + all);
  for (const char* dedup : {"on", "off"}) {
    const nlohmann::json exact_d = Json(std::string("space --rule=packed --dedup=") + dedup + all);
    const nlohmann::json est =
        Json(std::string("space --estimate --fraction 100% --rule=packed --dedup=") + dedup + all);
    EXPECT_EQ(est["counts"], exact_d["counts"]) << dedup;
    for (size_t i = 0; i < est["steps"].size(); ++i) {
      EXPECT_EQ(est["steps"][i]["bytes_low"], est["steps"][i]["bytes_high"]) << dedup << i;
    }
  }
}

TEST_F(SpaceEstimateCommand, WithoutDedupOnlyTheSampleIsRead) {
  const std::string all = host_[0] + host_[1];
  const nlohmann::json est = Json("space --estimate --dedup=off --fraction 5%" + all);
  const auto& cost = est["estimate"];
  const double share = cost["bytes_read"].get<double>() / cost["bytes_covered"].get<double>();
  EXPECT_GT(share, 0.02);
  EXPECT_LT(share, 0.08);
  EXPECT_EQ(cost["bytes_hashed"], 0);
  const nlohmann::json exact = Json("space --dedup=off" + all);
  for (size_t i = 2; i < 5; ++i) {
    EXPECT_LE(est["steps"][i]["ratio_low"].get<double>(),
              exact["steps"][i]["ratio"].get<double>() * (1 + 1e-9))
        << i;
    EXPECT_GE(est["steps"][i]["ratio_high"].get<double>(),
              exact["steps"][i]["ratio"].get<double>() * (1 - 1e-9))
        << i;
  }
}

TEST_F(SpaceEstimateCommand, SketchesFromHostsMergeIntoTheUnionsSketch) {
  const std::string a = dir_.File("a.vss"), b = dir_.File("b.vss"), u = dir_.File("u.vss"),
                    m = dir_.File("m.vss"), m2 = dir_.File("m2.vss");
  for (auto [file, images] : {std::pair{a, host_[0]}, {b, host_[1]}, {u, host_[0] + host_[1]}}) {
    testing::CommandResult r =
        RunVstack("space --estimate --fraction 10% --sketch " + file + images);
    ASSERT_EQ(r.status, 0) << r.output;
  }
  const nlohmann::json union_report = Json("space --estimate --fraction 10%" + host_[0] + host_[1]);
  const nlohmann::json merged = Json("space merge --sketch " + m + " " + a + " " + b);
  const nlohmann::json reversed = Json("space merge --sketch " + m2 + " " + b + " " + a);
  EXPECT_EQ(Slurp(m), Slurp(u)) << "the merge of the parts is the sketch of the union";
  EXPECT_EQ(Slurp(m2), Slurp(u));
  EXPECT_EQ(merged["steps"], union_report["steps"]);
  EXPECT_EQ(merged["counts"], union_report["counts"]);
  EXPECT_EQ(reversed["steps"], merged["steps"]);
  EXPECT_EQ(merged["estimate"]["sketches"], 2);
}

TEST_F(SpaceEstimateCommand, BadSketchesAndOptionsFailClearly) {
  const std::string a = dir_.File("a.vss"), b = dir_.File("b.vss"), bad = dir_.File("bad.vss");
  ASSERT_EQ(RunVstack("space --estimate --fraction 10% --sketch " + a + host_[0]).status, 0);
  ASSERT_EQ(RunVstack("space --estimate --fraction 5% --sketch " + b + host_[1]).status, 0);
  struct Case {
    std::string args, want;
    int status;
  };
  std::string bytes = Slurp(a);
  std::ofstream(bad, std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  for (const Case& c : std::vector<Case>{
           {"space merge " + a + " " + b, "different sampling fractions (1/10 and 1/20)", 1},
           {"space merge " + a + " " + bad, "not a valid vstack space sketch: checksum mismatch",
            1},
           {"space merge " + a + " " + host_[0].substr(1, host_[0].find(' ', 1) - 1),
            "no VSTKSKCH signature", 1},
           {"space merge " + dir_.File("none.vss"), "cannot open", 1},
           {"space --fraction 5%" + host_[0], "need --estimate", 2},
           {"space --estimate --fraction 0" + host_[0], "--fraction 0: expected a fraction", 2},
           {"space --estimate --fraction 1% --accuracy 1%" + host_[0], "not both", 2},
           {"space --estimate --confidence 100%" + host_[0], "below 100%", 2},
           {"space --estimate --mode=replay" + host_[0], "do not go together", 2},
           {"space --estimate --scope=image" + host_[0], "--scope global only", 2},
           {"space", "give the images", 2},
       }) {
    testing::CommandResult r = RunVstack(c.args);
    EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.want), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace vstack
