// The shared progress bar (tools/progress.h): it counts in the unit it shows, keeps its total,
// ends at 100% when the work was counted in full, and draws nothing when disabled.
#include "tools/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"

namespace vstack::cli {
namespace {

// What a bar drew on a temporary file.
class Drawn {
 public:
  Drawn() : f_(std::tmpfile()) {}
  ~Drawn() { std::fclose(f_); }
  std::FILE* file() { return f_; }
  std::string Text() {
    std::fflush(f_);
    std::rewind(f_);
    std::string s;
    for (int c; (c = std::fgetc(f_)) != EOF;) s += static_cast<char>(c);
    return s;
  }
  // The last state drawn (the text after the last '\r').
  std::string Last() {
    const std::string s = Text();
    return s.substr(s.rfind('\r') + 1);
  }

 private:
  std::FILE* f_;
};

TEST(Progress, BytesEndAtOneHundredPercentOfTheTotal) {
  Drawn out;
  {
    Progress bar("scan", 3 << 20, true, "", out.file());
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 256; ++i) bar.Add(4096);
      });
    }
    for (auto& t : threads) t.join();
    bar.Finish();
    bar.Finish();  // once only
  }
  const std::string last = out.Last();
  EXPECT_EQ(last.rfind("scan 100% |##############################| 3 MiB of 3 MiB  ", 0), 0u)
      << last;
  EXPECT_EQ(last.back(), '\n');
  EXPECT_EQ(out.Text().find('\n'), out.Text().size() - 1) << "more than one final line";
}

TEST(Progress, CountsAreShownInTheirUnitNotAsBytes) {
  Drawn out;
  Progress bar("compact: move", 5, true, "blocks", out.file());
  for (uint64_t done = 1; done <= 5; ++done) bar.Set(done);
  bar.Finish();
  const std::string last = out.Last();
  EXPECT_NE(last.find("100% |"), std::string::npos) << last;
  EXPECT_NE(last.find("| 5 of 5 blocks  "), std::string::npos) << last;
  EXPECT_NE(last.find(" blocks/s"), std::string::npos) << last;
  EXPECT_EQ(last.find(" B "), std::string::npos) << last;
}

TEST(Progress, UnfinishedWorkShowsWhereItStopped) {
  Drawn out;
  Progress bar("convert", 4 << 20, true, "", out.file());
  bar.Add(1 << 20);
  bar.Finish();
  EXPECT_EQ(out.Last().rfind("convert  25% |#######", 0), 0u) << out.Last();
  EXPECT_NE(out.Last().find("1 MiB of 4 MiB"), std::string::npos) << out.Last();
}

TEST(Progress, DisabledDrawsNothingAndAutoNeedsATerminal) {
  Drawn out;
  {
    Progress bar("scan", 100, false, "", out.file());
    bar.Add(100);
    bar.Finish();
  }
  EXPECT_EQ(out.Text(), "");
  EXPECT_TRUE(Progress::Wanted("on", 0));
  EXPECT_FALSE(Progress::Wanted("off", uint64_t{1} << 40));
}

// `vstack compact -p` counts blocks and says so, one bar per stage, each ending at 100%: four
// allocated blocks are scanned, the all-zero one is freed, and the last block moves into it.
TEST(Progress, CompactCountsBlocksAndFinishesEachStage) {
  testing::TempDir dir;
  const std::string vhd = dir.File("d.vhd");
  ASSERT_EQ(testing::RunVstack("create -f vhd -o block_size=512K " + vhd + " 2M").status, 0);
  {
    auto dev = Open("vhd+file:" + vhd);
    ASSERT_TRUE(testing::IsOk(dev));
    {
      SyncIo io(**dev);
      AlignedBuffer buf(512 << 10, 4096);
      for (int block = 0; block < 4; ++block) {
        std::memset(buf.data(), block == 1 ? 0 : 0x5a, buf.size());
        ASSERT_FALSE(io.Write(uint64_t(block) * buf.size(), buf.span()));
      }
    }
    ASSERT_TRUE(testing::IsOk((*dev)->Close()));
  }
  testing::CommandResult r = testing::RunVstack("compact -p " + vhd);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("1 all-zero block(s) freed of 4, 1 block(s) moved"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("compact: scan 100% |##############################| 4 of 4 blocks"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("compact: move 100% |##############################| 1 of 1 blocks"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find(" B of "), std::string::npos) << r.output;
}

}  // namespace
}  // namespace vstack::cli
