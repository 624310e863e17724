// `vstack space` as a user runs it: scan and replay agree exactly on several datasets and option
// sets; the counts are what the data holds; text, JSON and SVG carry the same numbers; bad
// options and inputs fail clearly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tools.h"

namespace vstack {
namespace {

using testing::RunVstack;
using testing::TempDir;

// Writes `data` at `offset` of a (sparse) file of `size` bytes, creating it if needed.
void PutAt(const std::string& path, uint64_t size, uint64_t offset, const std::vector<char>& data) {
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
  ASSERT_EQ(::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(data.size()));
  ::close(fd);
}

std::vector<char> Text(uint64_t seed, size_t n) {
  static const char* kWords[] = {"select ", "from ", "where ", "vstack ", "grain ", "index "};
  testing::Rng rng(seed);
  std::vector<char> out;
  while (out.size() < n) {
    for (const char* w = kWords[rng.Below(6)]; *w; ++w) out.push_back(*w);
  }
  out.resize(n);
  return out;
}

std::vector<char> Random(uint64_t seed, size_t n) {
  std::vector<char> out(n);
  testing::Rng rng(seed);
  rng.Fill(out.data(), n);
  return out;
}

// `vstack space --output=json ARGS`, run in `folder` when one is given (images named relative
// to it), else in the test's working folder.
nlohmann::json Space(const std::string& args, const std::string& folder = "") {
  const std::string command = "space --output=json " + args;
  testing::CommandResult r =
      folder.empty() ? RunVstack(command)
                     : testing::RunCommand("cd " + folder + " && " + VSTACK_CLI + " " + command);
  EXPECT_EQ(r.status, 0) << args << "\n" << r.output;
  try {
    return nlohmann::json::parse(r.output);
  } catch (...) {
    ADD_FAILURE() << "not JSON: " << r.output;
    return {};
  }
}

class SpaceCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    // Three VM-like images: a shared "OS" part (text), their own compressible data, some random
    // data, written zeros, and never-written space.
    const auto shared = Text(1, 4 << 20);
    for (int i = 0; i < 3; ++i) {
      const std::string p = dir_.File("vm" + std::to_string(i) + ".img");
      PutAt(p, 32 << 20, 0, shared);
      PutAt(p, 32 << 20, 8 << 20, Text(10 + i, 2 << 20));
      PutAt(p, 32 << 20, 12 << 20, Random(20 + i, 1 << 20));
      PutAt(p, 32 << 20, 16 << 20, std::vector<char>(1 << 20, 0));
      vms_ += " " + p;
    }
    // An image whose size is not a multiple of the grain, written to its very end.
    odd_ = dir_.File("odd.img");
    PutAt(odd_, (6 << 20) + 512, 0, Text(30, (6 << 20) + 512));
  }
  TempDir dir_;
  std::string vms_;
  std::string odd_;
};

TEST_F(SpaceCommand, CountsAreWhatTheImagesHold) {
  const nlohmann::json j = Space("--codec=none" + vms_);
  const auto& c = j["counts"];
  EXPECT_EQ(c["provisioned_bytes"], 3u * (32 << 20));
  // Written: 4 + 2 + 1 + 1 MiB per image, in 4 KiB grains.
  EXPECT_EQ(c["used_grains"], 3u * 8 * 256);
  EXPECT_EQ(c["zero_grains"], 3u * 256);
  // The shared 4 MiB once, the rest of each image's non-zero data once per image.
  EXPECT_EQ(c["unique_grains"], 1024u + 3u * (512 + 256));
  EXPECT_EQ(c["stored_bytes"], c["unique_grains"].get<uint64_t>() * 4096);
  const nlohmann::json per_image = Space("--codec=none --scope=image" + vms_);
  EXPECT_EQ(per_image["counts"]["unique_grains"], 3u * (1024 + 512 + 256));
  EXPECT_EQ(j["images"].size(), 3u);
  EXPECT_EQ(j["images"][0]["used_bytes"], 8u << 20);
}

// The property `vstack space` is built on: scan and replay agree exactly, on every dataset, for
// every option set (one test per option set, so they run in parallel).
class SpaceAgreement : public SpaceCommand, public ::testing::WithParamInterface<const char*> {};

TEST_P(SpaceAgreement, ScanAndReplayAgreeOnEveryDataset) {
  // A third dataset: an image read through a stack spec (zstd over a file).
  const std::string layered = dir_.File("layered.img");
  {
    auto dev = Open("zstd+file:" + layered + ",create=on,size=24M");
    ASSERT_TRUE(dev.has_value());
    SyncIo io(**dev);
    const auto t = Text(40, 3 << 20);
    AlignedBuffer b(t.size());
    std::memcpy(b.data(), t.data(), t.size());
    ASSERT_FALSE(io.Write(1 << 20, b.span()));
  }
  const std::string opts = GetParam();
  for (const std::string& data : {vms_, " " + odd_ + vms_, " zstd+file:" + layered}) {
    const nlohmann::json scan = Space(opts + " --mode=scan" + data);
    const nlohmann::json replay = Space(opts + " --mode=replay" + data);
    EXPECT_EQ(scan["counts"], replay["counts"]) << opts << " on" << data;
    EXPECT_EQ(scan["steps"], replay["steps"]) << opts << " on" << data;
    // The replay also states what the layers really hold (whole bins): never below the model.
    EXPECT_FALSE(scan.contains("physical"));
    EXPECT_EQ(replay["physical"]["modelled_bytes"], replay["counts"]["stored_bytes"]);
    EXPECT_GE(replay["physical"]["physical_bytes"].get<uint64_t>(),
              replay["counts"]["stored_bytes"].get<uint64_t>())
        << opts << " on" << data;
  }
}

INSTANTIATE_TEST_SUITE_P(Options, SpaceAgreement,
                         ::testing::Values("", "--scope=image --rule=sector",
                                           "--scope=groups=2 --rule=packed --codec=zstd:3",
                                           "--grain=16K --rule=min-saving=12.5", "--codec=none",
                                           "--dedup=off --codec=zstd:-1",
                                           "--grain=64K --protection=raid5 --threads=1"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return "set" + std::to_string(i.index);
                         });

TEST_F(SpaceCommand, ReplayOntoFilesLeavesNothingBehind) {
  const nlohmann::json on_files = Space("--mode=replay --replay-dir=" + dir_.path() + vms_);
  EXPECT_EQ(on_files["counts"], Space(vms_)["counts"]);
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(entry.path().filename().string().find("replay"), std::string::npos)
        << entry.path() << " was left behind";
  }
}

// Ctrl-C during a replay onto files left the replay's sparse file in the directory (369 MB, 19 MB
// of it written, for a 48 MiB image); now the run stops at its next chunk, removes it and exits
// 130. A scan stops the same way. The SIGINT goes once the first 4 MiB chunk has been read (the
// process's rchar), so that it lands in the run, however slowly the process starts.
TEST_F(SpaceCommand, AnInterruptedReplayRemovesItsFiles) {
  const std::string replay_dir = dir_.File("replay");
  std::filesystem::create_directory(replay_dir);
  // Each 4 MiB chunk takes 400 ms to read: the whole image, 12 of them.
  const std::string image = dir_.File("big.img");
  testing::WriteFile(image, 48 << 20, 0x5A);
  const std::string slow = "'delay:read=400ms,qd=1+file:" + image + "'";
  for (const std::string& mode : {"--mode=replay --replay-dir=" + replay_dir, std::string()}) {
    testing::CommandResult r = testing::RunCommand(
        std::string(VSTACK_CLI) + " space " + mode + " " + slow + " 2>&1 & pid=$!; " +
        "for i in $(seq 600); do r=$(awk '/^rchar/ {print $2}' /proc/$pid/io 2>/dev/null); " +
        "[ \"${r:-0}\" -ge 4194304 ] && break; sleep 0.02; done; " +
        "kill -INT $pid; wait $pid; echo status=$?");
    EXPECT_NE(r.output.find("status=130"), std::string::npos) << mode << "\n" << r.output;
    EXPECT_NE(r.output.find("vstack space: interrupted"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("what the replay had written was removed") != std::string::npos,
              !mode.empty())
        << r.output;
    EXPECT_TRUE(std::filesystem::is_empty(replay_dir)) << "the replay's file was left behind";
  }
}

TEST_F(SpaceCommand, TextJsonAndSvgCarryTheSameNumbers) {
  const std::string svg = dir_.File("w.svg");
  testing::CommandResult t =
      RunVstack("space --rule=sector --protection=raid6 --svg " + svg + vms_);
  ASSERT_EQ(t.status, 0) << t.output;
  const nlohmann::json j = Space("--rule=sector --protection=raid6" + vms_);
  ASSERT_EQ(j["steps"].size(), 7u);
  std::ifstream f(svg);
  std::stringstream chart;
  chart << f.rdbuf();
  EXPECT_NE(chart.str().find("<svg"), std::string::npos);
  for (const auto& step : j["steps"]) {
    const std::string bytes = std::to_string(step["bytes"].get<uint64_t>());
    EXPECT_NE(t.output.find(bytes), std::string::npos) << "text lacks " << bytes;
  }
  const double overall = j["overall"];
  char want[64];
  std::snprintf(want, sizeof want, "overall (used / after protection):      %.2fx", overall);
  EXPECT_NE(t.output.find(want), std::string::npos) << t.output;
  std::snprintf(want, sizeof want, "overall %.2fx", overall);
  EXPECT_NE(chart.str().find(want), std::string::npos);
  EXPECT_NE(t.output.find("RAID-6 (4+2)"), std::string::npos);
  const double protection =
      j["steps"][6]["bytes"].get<double>() / j["steps"][5]["bytes"].get<double>();
  EXPECT_NEAR(protection, 1.5, 1e-6);
  // Provisioned (96 MiB) is 4x used (24 MiB): its bar is cut, and so is the next bar's saving
  // (it starts at 96 MiB); each cut bar carries a zigzag, the only <path> in the chart.
  size_t zigzags = 0;
  for (size_t at = chart.str().find("<path"); at != std::string::npos;
       at = chart.str().find("<path", at + 1)) {
    ++zigzags;
  }
  EXPECT_EQ(zigzags, 2u) << chart.str();
}

TEST_F(SpaceCommand, NothingToReduceIsOneAndEverythingRemovedIsUnbounded) {
  // An image that holds only written zeros: zero elimination removes everything. Its ratio
  // and the overall ratio are unbounded (text ∞, JSON null); they read 1.00x and 0.00x.
  const std::string zeros = dir_.File("zeros.img");
  PutAt(zeros, 4 << 20, 0, std::vector<char>(4 << 20, 0));
  const std::string bare = "--dedup=off --codec=none --checksum=off --protection=none ";
  const nlohmann::json j = Space(bare + zeros);
  ASSERT_EQ(j["steps"].size(), 7u);
  EXPECT_EQ(j["steps"][1]["bytes"], 4u << 20);
  EXPECT_EQ(j["steps"][2]["bytes"], 0u);
  EXPECT_TRUE(j["steps"][2]["ratio"].is_null()) << j["steps"][2];
  EXPECT_TRUE(j["overall"].is_null()) << j;
  EXPECT_TRUE(j["data_reduction"].is_null()) << j;
  EXPECT_EQ(j["steps"][3]["ratio"], 1.0) << "0 bytes to 0 bytes: nothing to reduce";
  testing::CommandResult t = RunVstack("space " + bare + zeros);
  ASSERT_EQ(t.status, 0) << t.output;
  EXPECT_NE(t.output.find("overall (used / after protection):      \u221ex"), std::string::npos)
      << t.output;
  // A never-written image: nothing used, nothing reduced, 1.00x rather than 0.00x.
  const std::string empty = dir_.File("empty.img");
  PutAt(empty, 4 << 20, 0, {});
  const nlohmann::json e = Space(bare + empty);
  EXPECT_EQ(e["steps"][1]["bytes"], 0u);
  EXPECT_EQ(e["overall"], 1.0) << e;
  EXPECT_EQ(e["data_reduction"], 1.0) << e;
  for (size_t i = 2; i < 7; ++i) EXPECT_EQ(e["steps"][i]["ratio"], 1.0) << e["steps"][i];
}

TEST_F(SpaceCommand, TheSameContentCountsTheSameInEveryContainer) {
  // 1 MiB of data in a 64 MiB disk, raw and in the VHDX qemu-img makes of it. qemu-img
  // creates every VHDX block ZERO, which counted as 64 MiB "used (written)" (data reduction
  // 963x for an empty image); an allocated block counted whole, written or not.
  VSTACK_REQUIRE_PROGRAM("qemu-img", "qemu-utils");
  const std::string raw = dir_.File("one.raw");
  PutAt(raw, 64 << 20, 8 << 20, Random(7, 1 << 20));
  const std::string empty = dir_.File("empty.vhdx"), dynamic = dir_.File("dynamic.vhdx"),
                    fixed = dir_.File("fixed.vhdx");
  for (const std::string& cmd :
       {"qemu-img create -q -f vhdx " + empty + " 64M",
        "qemu-img convert -O vhdx " + raw + " " + dynamic,
        "qemu-img convert -O vhdx -o subformat=fixed " + raw + " " + fixed}) {
    const testing::CommandResult r = testing::RunCommand(cmd + " 2>&1");
    ASSERT_EQ(r.status, 0) << cmd << "\n" << r.output;
  }
  const nlohmann::json j = Space("--codec=none " + raw + " " + empty + " " + dynamic + " " + fixed);
  ASSERT_EQ(j["images"].size(), 4u) << j;
  EXPECT_EQ(j["images"][0]["used_bytes"], 1u << 20) << j["images"][0];
  EXPECT_EQ(j["images"][1]["used_bytes"], 0u) << j["images"][1];
  EXPECT_EQ(j["images"][2]["used_bytes"], 1u << 20) << j["images"][2];
  EXPECT_EQ(j["images"][3]["used_bytes"], 1u << 20) << j["images"][3];
}

TEST_F(SpaceCommand, ShowsProgressWhenAsked) {
  testing::CommandResult r = RunVstack("space --progress=on" + vms_);
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("scan 100% |##############################|"), std::string::npos)
      << r.output;
  testing::CommandResult q = RunVstack("space --progress=auto" + vms_);  // not a terminal
  EXPECT_EQ(q.output.find("100%"), std::string::npos);
}

TEST_F(SpaceCommand, BadOptionsAndInputsFailClearly) {
  struct Case {
    std::string args;
    std::string want;
    int status = 2;  // a usage error (docs/cli.md)
  };
  for (const Case& c : std::vector<Case>{
           {"--scope=groups=0" + vms_, "--scope groups=0: expected groups=N"},
           {"--scope=pool" + vms_, "--scope 'pool' is not one of"},
           {"--grain=3K" + vms_, "--grain 3K: not a power of two"},
           {"--codec=lz4" + vms_, "--codec 'lz4' is not zstd:N or none"},
           {"--codec=zstd:99" + vms_, "the zstd level must be from"},
           {"--rule=half" + vms_, "rule 'half' is not one of"},
           {"--protection=raid10" + vms_, "--protection 'raid10' is not one of"},
           {"--mode=replay --dedup=off --codec=none" + vms_, "needs a layer to replay through"},
           {"--pool rbd" + vms_, "--pool needs --mode=ceph"},
           {"--mode=ceph" + vms_, "--mode=ceph needs the pools to measure"},
           {"--mode=ceph --pool rbd --estimate" + vms_, "--estimate and --mode=ceph"},
           {" /nonexistent/vm.img", "No such file or directory", 1},
       }) {
    testing::CommandResult r = RunVstack("space " + c.args);
    EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.want), std::string::npos) << c.args << "\n" << r.output;
  }
}

// No cluster answering: a clear error naming the monitors, within the timeout asked for.
TEST_F(SpaceCommand, CephModeWithoutAClusterFailsWithinTheTimeout) {
  const std::string conf = dir_.File("ceph.conf");
  std::ofstream(conf) << "[global]\nmon host = v1:127.0.0.1:9\nauth client required = none\n"
                         "ms bind msgr2 = false\nlog file = /dev/null\n";
  testing::CommandResult r =
      RunVstack("space --mode=ceph --pool rbd --ceph-timeout 2 --ceph-conf " + conf + vms_);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("cannot reach the Ceph monitors at 'v1:127.0.0.1:9' within 2 s"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace vstack

namespace vstack {
namespace {

// The dataset generator (bench/datasets/make_datasets.py) is reproducible byte for byte, and
// scan and replay agree on what it makes. The README set-up installs python3 and e2fsprogs, so
// their absence is a failure, not a skip.
TEST(SpaceDatasets, GeneratorIsReproducibleAndScanEqualsReplay) {
  ASSERT_TRUE(testing::HaveProgram("python3")) << "python3 is missing: run ./dev.sh to install it";
  ASSERT_TRUE(testing::HaveProgram("mke2fs")) << "mke2fs is missing: run ./dev.sh to install it";
  TempDir a, b;
  const std::string gen = std::string("python3 ") + VSTACK_SOURCE_DIR +
                          "/bench/datasets/make_datasets.py --preset tiny ";
  for (const TempDir* d : {&a, &b}) {
    testing::CommandResult r = testing::RunCommand(gen + d->path());
    ASSERT_EQ(r.status, 0) << r.output;
  }
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  const std::string manifest = slurp(a.File("manifest.txt"));
  EXPECT_NE(manifest.find("vm01.img size=50331648"), std::string::npos) << manifest;
  EXPECT_EQ(manifest, slurp(b.File("manifest.txt")));
  const std::string images = " " + a.File("vm00.img") + " " + a.File("vm01.img");
  const nlohmann::json scan = Space("--mode=scan" + images);
  const nlohmann::json replay = Space("--mode=replay" + images);
  EXPECT_EQ(scan["counts"], replay["counts"]);
  // The dataset has what it promises: shared template (dedup), zeros, compressible data.
  for (size_t s = 2; s <= 4; ++s) EXPECT_GT(scan["steps"][s]["ratio"].get<double>(), 1.05) << s;
}

}  // namespace
}  // namespace vstack

namespace vstack {
namespace {

// `vstack info` shows each transform layer's space figures, in text and JSON, with the same
// numbers the layers report through Space().
TEST(InfoSpace, ShowsEveryTransformLayersFigures) {
  TempDir dir;
  const std::string path = dir.File("d.img");
  SpaceUsage dedup_usage, zstd_usage;
  {
    auto dev = Open("crc32c+dedup+zstd:rule=packed+file:" + path + ",create=on,size=48M");
    ASSERT_TRUE(dev.has_value());
    SyncIo io(**dev);
    const auto t = Text(7, 1 << 20);
    AlignedBuffer b(t.size());
    std::memcpy(b.data(), t.data(), t.size());
    ASSERT_FALSE(io.Write(0, b.span()));
    ASSERT_FALSE(io.Write(4 << 20, b.span()));  // the same megabyte again: dedup hits
    ASSERT_FALSE(io.Flush());
  }
  {
    auto dev = Open("crc32c+dedup+zstd+file:" + path);
    ASSERT_TRUE(dev.has_value());
    dedup_usage = *(*dev)->lower()->Space();
    zstd_usage = *(*dev)->lower()->lower()->Space();
  }
  // 256 grains of data written twice, plus crc32c's own metadata (it sits above dedup).
  EXPECT_GE(dedup_usage.unique_grains, 256u);
  EXPECT_LT(dedup_usage.unique_grains, 300u);
  testing::CommandResult j = RunVstack("info --output=json crc32c+dedup+zstd+file:" + path);
  ASSERT_EQ(j.status, 0) << j.output;
  const nlohmann::json doc = nlohmann::json::parse(j.output);
  ASSERT_EQ(doc["layers"].size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(doc["layers"][i]["properties"].contains("space_metadata_bytes")) << i;
  }
  const auto& dp = doc["layers"][1]["properties"];
  EXPECT_EQ(dp["space_unique_grains"], dedup_usage.unique_grains);
  EXPECT_EQ(dp["space_logical_bytes_live"], dedup_usage.logical_bytes_live);
  EXPECT_GE(dp["dedup_ratio"].get<double>(), 1.9);
  EXPECT_EQ(doc["layers"][2]["properties"]["space_stored_bytes"], zstd_usage.stored_bytes);
  testing::CommandResult t = RunVstack("info crc32c+dedup+zstd+file:" + path);
  ASSERT_EQ(t.status, 0);
  EXPECT_NE(t.output.find("space_unique_grains"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find(std::to_string(zstd_usage.stored_bytes)), std::string::npos);
  // A read-only look at blank memory writes nothing and shows empty layers.
  testing::CommandResult blank = RunVstack("info dedup+zstd+memory:1G");
  EXPECT_EQ(blank.status, 0) << blank.output;
  EXPECT_NE(blank.output.find("[1] zstd"), std::string::npos);
}

}  // namespace
}  // namespace vstack

// `vstack space --estimate` and `vstack space merge`: every step carries an interval that holds
// the exact scan's value, a full sample is the exact scan, the estimate reads only its sample
// without dedup, sketches from several "hosts" (directories) merge into the sketch of the union,
// and bad sketches or options fail clearly.
namespace vstack {
namespace {

using testing::RunVstack;
using testing::TempDir;

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
        relative_ += " host" + std::to_string(h) + "/vm" + std::to_string(v) + ".img";
      }
    }
  }
  TempDir dir_;
  std::string host_[2];
  std::string relative_;  // the four images, named relative to dir_
};

TEST_F(SpaceEstimateCommand, EveryStepsIntervalHoldsTheExactValue) {
  const std::string all = host_[0] + host_[1];
  const nlohmann::json exact = Space(all);
  const nlohmann::json est = Space("--estimate --fraction 25%" + all);
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
  for (const char* dedup : {"on", "off"}) {
    const nlohmann::json exact_d = Space(std::string("--rule=packed --dedup=") + dedup + all);
    const nlohmann::json est =
        Space(std::string("--estimate --fraction 100% --rule=packed --dedup=") + dedup + all);
    EXPECT_EQ(est["counts"], exact_d["counts"]) << dedup;
    for (size_t i = 0; i < est["steps"].size(); ++i) {
      EXPECT_EQ(est["steps"][i]["bytes_low"], est["steps"][i]["bytes_high"]) << dedup << i;
    }
  }
}

TEST_F(SpaceEstimateCommand, WithoutDedupOnlyTheSampleIsRead) {
  // Without dedup the grains are sampled by position, with a hash of the image's name as given:
  // names relative to the test's folder make the sample, and so this test, the same on every
  // run (absolute names in a fresh temporary folder drew a new sample each time).
  const nlohmann::json est = Space("--estimate --dedup=off --fraction 5%" + relative_, dir_.path());
  const auto& cost = est["estimate"];
  const double share = cost["bytes_read"].get<double>() / cost["bytes_covered"].get<double>();
  EXPECT_GT(share, 0.02);
  EXPECT_LT(share, 0.08);
  EXPECT_EQ(cost["bytes_hashed"], 0);
  const nlohmann::json exact = Space("--dedup=off" + relative_, dir_.path());
  // A 95% interval misses the truth for one sample in twenty, so one sample cannot assert
  // coverage: the coverage rate is counted over many seeds in SpaceEstimate. Here the truth
  // must lie within one interval width of the interval, about six standard errors from the
  // estimate. (Over 40 samples drawn by the old absolute names, the compression step's truth
  // was as far as 4.4 standard errors from its estimate, and one CI run saw 5.9: a sample that
  // misses the incompressible grains underestimates the mean and its spread together, which
  // the compression interval now allows for: SpaceEstimate.CompressionIntervalHolds...)
  for (size_t i = 2; i < 5; ++i) {
    const double low = est["steps"][i]["ratio_low"].get<double>();
    const double high = est["steps"][i]["ratio_high"].get<double>();
    const double truth = exact["steps"][i]["ratio"].get<double>();
    EXPECT_LE(low, high) << i;
    EXPECT_LE(low - (high - low), truth) << i;
    EXPECT_GE(high + (high - low), truth) << i;
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
  const nlohmann::json union_report = Space("--estimate --fraction 10%" + host_[0] + host_[1]);
  const nlohmann::json merged = Space("merge --sketch " + m + " " + a + " " + b);
  const nlohmann::json reversed = Space("merge --sketch " + m2 + " " + b + " " + a);
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
           // A file that cannot be read or written says why (it said only "cannot open").
           {"space merge " + dir_.File("none.vss"),
            "vstack space merge: cannot open '" + dir_.File("none.vss") +
                "': No such file or directory",
            1},
           {"space merge " + dir_.path(), "'" + dir_.path() + "' is a directory", 1},
           {"space --estimate --sketch " + dir_.File("nodir/s.vss") + host_[0],
            "vstack space: cannot write sketch '" + dir_.File("nodir/s.vss") +
                "': No such file or directory",
            1},
           {"space --estimate --sketch " + dir_.path() + host_[0],
            "cannot write sketch '" + dir_.path() + "': Is a directory", 1},
           {"space --estimate --svg " + dir_.File("nodir/s.svg") + host_[0],
            "vstack space: cannot write '" + dir_.File("nodir/s.svg") +
                "': No such file or directory",
            1},
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
