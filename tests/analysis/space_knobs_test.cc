// vstack space as library calls (analysis/space/space.h, space_knobs.h): every bad option is
// refused with the command line's words, and AnalyzeSpace() and MergeSpaceSketches() give the
// JSON `vstack space --output=json` prints for the same images and options, byte for byte apart
// from the time an estimate took, for a scan, a replay, an estimate and a merge, with the figures
// of that document and the sketch file the command line writes.
#include "analysis/space/space_knobs.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>

#include "analysis/space/space.h"
#include "analysis/space/space_render.h"
#include "analysis/space/space_run.h"
#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"

namespace vstack {
namespace {

using nlohmann::json;
using testing::TempDir;

TEST(SpaceKnobs, EveryBadOptionIsRefusedWithTheCommandLinesWords) {
  const std::pair<std::function<void(SpaceKnobs&)>, const char*> cases[] = {
      {[](SpaceKnobs& k) { k.grain = "3K"; }, "--grain 3K: not a power of two from 4K to 64K"},
      {[](SpaceKnobs& k) { k.threads = 100000; }, "--threads 100000: at most 1024"},
      {[](SpaceKnobs& k) { k.grain = "4Q"; }, "--grain"},
      {[](SpaceKnobs& k) { k.dedup = "maybe"; }, "--dedup: 'maybe' is not one of on|off"},
      {[](SpaceKnobs& k) { k.checksum = "yes"; }, "--checksum: 'yes' is not one of on|off"},
      {[](SpaceKnobs& k) { k.mode = "guess"; }, "--mode: 'guess' is not one of scan|replay|ceph"},
      {[](SpaceKnobs& k) { k.mode = "replya"; }, "did you mean `replay`?"},
      {[](SpaceKnobs& k) { k.scope = "world"; }, "world"},
      {[](SpaceKnobs& k) { k.codec = "lz4"; }, "lz4"},
      {[](SpaceKnobs& k) { k.protection = "raid7"; }, "raid7"},
      {[](SpaceKnobs& k) { k.ceph.pools = {"rbd"}; }, "--pool needs --mode=ceph"},
      {[](SpaceKnobs& k) { k.mode = "ceph"; },
       "--mode=ceph needs the pools to measure: --pool POOL (repeatable)"},
      {[](SpaceKnobs& k) { k.confidence = "100%"; },
       "--confidence 100%: expected a level such as 95%, below 100%"},
      {[](SpaceKnobs& k) { k.fraction = "1%"; },
       "--fraction, --accuracy and --sketch need --estimate"},
      {[](SpaceKnobs& k) { k.sketch = "x.vss"; },
       "--fraction, --accuracy and --sketch need --estimate"},
      {[](SpaceKnobs& k) { k.estimate = true, k.mode = "replay"; },
       "--estimate and --mode=replay do not go together"},
      {[](SpaceKnobs& k) { k.estimate = true, k.fraction = "1%", k.accuracy = "1%"; },
       "give --fraction or --accuracy, not both"},
      {[](SpaceKnobs& k) { k.estimate = true, k.fraction = "2"; },
       "--fraction 2: expected a fraction such as 1% or 0.01, above 0, at most 1"},
  };
  for (const auto& [change, message] : cases) {
    SpaceKnobs k;
    change(k);
    auto o = SpaceOptionsFrom(k);
    ASSERT_FALSE(o) << message;
    EXPECT_NE(o.error().message.find(message), std::string::npos)
        << "expected '" << message << "', got '" << o.error().message << "'";
  }
  SpaceKnobs k;
  k.estimate = true;
  EXPECT_EQ(SpaceOptionsFrom(k)->modulus, 100u);  // 1% by default
  k.fraction = "0.1";
  EXPECT_EQ(SpaceOptionsFrom(k)->modulus, 10u);
  k.fraction.clear();
  k.accuracy = "1%";
  EXPECT_EQ(SpaceOptionsFrom(k)->modulus, 1u);
  EXPECT_GT(SpaceOptionsFrom(k)->cap, 0u);
}

TEST(SpaceKnobs, GroupsAsManyAsTheImagesIsSaidToBePerImage) {
  SpaceKnobs k;
  k.scope = "groups=3";
  const SpaceOptions o = *SpaceOptionsFrom(k);
  EXPECT_EQ(ScopeNote(o, 4), "");
  EXPECT_EQ(ScopeNote(o, 3),
            "--scope groups=3 with 3 images puts every image in a group of its own, which is the "
            "same as --scope image");
  EXPECT_EQ(ScopeNote(*SpaceOptionsFrom(SpaceKnobs{}), 1), "");
}

class SpaceLibrary : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      images_.push_back(dir_.File("vm" + std::to_string(i) + ".img"));
      testing::WriteFile(images_.back(), 2 << 20, 0);
      // Half of each image shared, a quarter its own, a quarter zeros.
      auto dev = Open("file:" + images_.back());
      ASSERT_TRUE(dev);
      SyncIo io(**dev);
      AlignedBuffer b(1 << 20);
      testing::Rng(7).Fill(b.data(), b.size());
      ASSERT_FALSE(io.Write(0, b.span()));
      testing::Rng(100 + i).Fill(b.data(), b.size());
      ASSERT_FALSE(io.Write(1 << 20, b.span().subspan(0, 512 << 10)));
    }
  }

  // The public call's run of `knobs` on the images (analysis/space/space.h), as JSON; checks
  // that its figures and progress agree with the document.
  json Library(const SpaceKnobs& knobs) {
    uint64_t total = 0, done = 0;
    SpaceHooks hooks;
    hooks.on_start = [&](uint64_t bytes) { total = bytes; };
    std::mutex mu;
    hooks.on_progress = [&](uint64_t bytes) {
      std::lock_guard lock(mu);
      done += bytes;
    };
    auto run = AnalyzeSpace(knobs, images_, hooks);
    EXPECT_TRUE(run) << run.error().message;
    if (!run) return {};
    const json j = json::parse(run->json);
    uint64_t used = 0;
    for (const json& image : j["images"]) used += image["used_bytes"].get<uint64_t>();
    EXPECT_EQ(total, used);
    EXPECT_GT(done, 0u);
    EXPECT_LE(done, total);
    EXPECT_EQ(run->steps.size(), j["steps"].size());
    for (size_t i = 0; i < run->steps.size(); ++i) {
      EXPECT_EQ(run->steps[i].key, j["steps"][i]["step"]);
      EXPECT_EQ(run->steps[i].bytes, j["steps"][i]["bytes"]);
    }
    EXPECT_DOUBLE_EQ(run->overall, j["overall"].get<double>());
    EXPECT_EQ(run->svg.rfind("<svg", 0), 0u);
    EXPECT_EQ(run->sketch.empty(), !knobs.estimate);
    sketch_ = run->sketch;
    return j;
  }

  json Cli(const std::string& args) {
    testing::CommandResult r = testing::RunVstack("space --output=json " + args + " " +
                                                  images_[0] + " " + images_[1]);
    EXPECT_EQ(r.status, 0) << r.output;
    return json::parse(r.output);
  }

  TempDir dir_;
  std::vector<std::string> images_;
  std::string sketch_;  // the last Library() run's
};

TEST_F(SpaceLibrary, ScanReplayAndEstimateGiveTheCommandLinesJson) {
  SpaceKnobs scan;
  scan.scope = "groups=2";  // with the note
  EXPECT_EQ(Library(scan), Cli("--scope groups=2"));
  SpaceKnobs replay;
  replay.mode = "replay";
  replay.rule = "packed";
  EXPECT_EQ(Library(replay), Cli("--mode replay --rule packed"));
  SpaceKnobs estimate;  // on one thread, whose cost figures (peak fingerprints ...) are exact
  estimate.estimate = true;
  estimate.fraction = "50%";
  estimate.threads = 1;
  const std::string sketch_file = dir_.File("cli.vss");
  json lib = Library(estimate),
       cli = Cli("--estimate --fraction 50% --threads 1 --sketch " + sketch_file);
  std::ifstream written(sketch_file, std::ios::binary);
  EXPECT_EQ(sketch_, std::string(std::istreambuf_iterator<char>(written), {}));  // the CLI's file
  ASSERT_TRUE(lib["estimate"].contains("seconds"));
  lib["estimate"].erase("seconds");
  cli["estimate"].erase("seconds");
  EXPECT_EQ(lib, cli);
}

// keep_going (space.h) saying no at the first chunk stops every mode with kCancelled, and a
// replay onto files removes them.
TEST_F(SpaceLibrary, KeepGoingStopsEveryModeAndTheReplayRemovesItsFiles) {
  SpaceKnobs scan, replay, on_files, estimate, sampled;
  replay.mode = on_files.mode = "replay";
  on_files.replay_dir = dir_.File("replay");
  std::filesystem::create_directory(on_files.replay_dir);
  estimate.estimate = sampled.estimate = true;
  sampled.dedup = "off";  // reads only the sampled grains, on the calling thread
  sampled.fraction = "100%";
  for (const SpaceKnobs& knobs : {scan, replay, on_files, estimate, sampled}) {
    std::atomic<int> asked{0};
    SpaceHooks hooks;
    hooks.keep_going = [&] {
      ++asked;
      return false;
    };
    auto run = AnalyzeSpace(knobs, images_, hooks);
    ASSERT_FALSE(run) << knobs.mode << (knobs.estimate ? " estimate" : "");
    EXPECT_EQ(run.error().code, make_error_code(Errc::kCancelled)) << run.error().message;
    EXPECT_NE(run.error().message.find("interrupted"), std::string::npos) << run.error().message;
    EXPECT_GE(asked.load(), 1);
  }
  EXPECT_TRUE(std::filesystem::is_empty(on_files.replay_dir));
  SpaceHooks yes;
  yes.keep_going = [] { return true; };
  EXPECT_TRUE(AnalyzeSpace(scan, images_, yes));
}

TEST_F(SpaceLibrary, AMergeGivesTheCommandLinesJson) {
  std::vector<std::string> sketches;
  for (size_t i = 0; i < images_.size(); ++i) {
    sketches.push_back(dir_.File("host" + std::to_string(i) + ".vss"));
    ASSERT_EQ(testing::RunVstack("space --estimate --fraction 50% --sketch " + sketches[i] + " " +
                                 images_[i]).status,
              0);
  }
  SpaceKnobs k;
  k.protection = "raid5";
  auto merged = MergeSpaceSketches(k, sketches);  // the public call (space.h)
  ASSERT_TRUE(merged) << merged.error().message;
  testing::CommandResult cli = testing::RunVstack("space merge --output=json --protection raid5 " +
                                                  sketches[0] + " " + sketches[1]);
  ASSERT_EQ(cli.status, 0) << cli.output;
  EXPECT_EQ(json::parse(merged->json), json::parse(cli.output));
  EXPECT_FALSE(merged->sketch.empty());
  auto missing = MergeSketchFiles({dir_.File("none.vss")});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message,
            "cannot open '" + dir_.File("none.vss") + "': No such file or directory");
  auto folder = MergeSketchFiles({dir_.path()});
  ASSERT_FALSE(folder);
  EXPECT_EQ(folder.error().message, "'" + dir_.path() + "' is a directory; give a sketch file");
  // A NUL byte would cut the path short: the sketch before it read in its place.
  auto cut = MergeSketchFiles({sketches[0] + std::string(1, '\0') + "x"});
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().message, "the sketch file's path contains a NUL byte at position " +
                                     std::to_string(sketches[0].size()));
}

}  // namespace
}  // namespace vstack
