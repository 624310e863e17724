// Differencing VHD chains: reads through the parent (per sector, coalesced), writes that keep
// uncovered sectors reading as the parent's, write-zeroes hiding the parent, extents, deep
// chains, and the errors for missing parents, mismatched links, loops and bad locators.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "formats/vhd/vhd_parent.h"
#include "lib/sync_io.h"
#include "tests/formats/vhd_test_util.h"
#include "tests/testing/conformance.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Conformance: a child over an empty dynamic parent, found through its locators (file), or
// named as an explicit parent stack on another backend (uring child, file parent).
ConformanceTarget DiffTarget(std::string name, std::string spec) {
  return SpecTarget(std::move(name), spec, spec, [](const std::string& dir) {
    ASSERT_OK(CreateImage("vhd", dir + "/p.vhd", kConformanceSize));
    ASSERT_OK(CreateImage("vhd", dir + "/c.vhd", 0, "backing_file=p.vhd"));
  });
}

VSTACK_CONFORMANCE_TARGETS(vhd_diff,
                           {
                               DiffTarget("vhd_diff_file", "vhd+file:{dir}/c.vhd"),
                               DiffTarget("vhd_diff_uring_parent_spec",
                                          "vhd:parent=vhd\\+file\\:{dir}/p.vhd+uring:{dir}/c.vhd"),
                           });

std::vector<unsigned char> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

std::string TextProperty(BlockDevice& dev, const std::string& key) {
  PropertyList props;
  dev.Properties(props);
  for (const Property& p : props) {
    if (p.key == key) return PropertyValueToString(p.value);
  }
  return "";
}

void Put(std::vector<unsigned char>& model, uint64_t at, const std::vector<unsigned char>& d) {
  std::copy(d.begin(), d.end(), model.begin() + static_cast<ptrdiff_t>(at));
}

class VhdDiff : public ::testing::Test {
 protected:
  TempDir dir_;  // first: the paths below use it
  std::string base_ = dir_.File("base.vhd");
  std::string child_ = dir_.File("child.vhd");

  // A 16 MiB base with data in blocks 0, 1 (partly) and 5; the model holds what it reads.
  void MakeBase() {
    ASSERT_OK(CreateImage("vhd", base_, 16 * kMiB));
    auto dev = OpenImage(base_);
    ASSERT_OK(dev);
    model_.assign((*dev)->geometry().size_bytes, 0);
    for (auto [at, len, seed] : {std::tuple<uint64_t, size_t, uint32_t>{0, 2 * kMiB, 1},
                                 {2 * kMiB + 4096, 8192, 2},
                                 {10 * kMiB, 1 * kMiB, 3}}) {
      const auto d = Random(len, seed);
      WriteBytes(**dev, at, d);
      Put(model_, at, d);
    }
  }

  std::vector<unsigned char> model_;
};

TEST_F(VhdDiff, NewChildReadsAsItsParentAndRecordsTheLink) {
  MakeBase();
  ASSERT_OK(CreateImage("vhd", child_, 0, "backing_file=base.vhd"));
  auto dev = OpenImage(child_);
  ASSERT_OK(dev);
  auto* vhd = dynamic_cast<vhd::VhdDevice*>(dev->get());
  ASSERT_NE(vhd, nullptr);
  EXPECT_TRUE(vhd->image().footer.is_differencing());
  EXPECT_NE(vhd->parent(), nullptr);
  EXPECT_FALSE(vhd->parent()->Has(kCapWrite)) << "parents open read-only";
  EXPECT_EQ((*dev)->geometry().size_bytes, model_.size());
  EXPECT_EQ(ReadBytes(**dev, 0, model_.size()), model_);
  // Locators: W2ku absolute, W2ru relative, MacX URL; the parent name is the file name.
  const auto locs = vhd::ReadLocators(*vhd->lower(), vhd->image());
  ASSERT_EQ(locs.size(), 3u);
  EXPECT_EQ(locs[0].path, std::filesystem::path(base_).lexically_normal().string());
  EXPECT_EQ(locs[1].path, "./base.vhd");
  EXPECT_EQ(locs[2].path, locs[0].path);
  EXPECT_EQ(vhd::Utf16ToUtf8(vhd->image().header.parent_name), "base.vhd");
  EXPECT_TRUE(vhd->image().findings.empty() ||
              vhd->image().CountFindings(vhd::Finding::kCorruption) == 0);
}

// A timed parent stack deeper than the child, with a delay two levels above the child's: reads
// of sectors the child does not hold complete from the parent's callbacks, whose paths carry
// self time above the child's level. That time counts as the child's own (IoQueue::LinkTime), so
// the levels' self times at the top still add up to the latency measured there.
TEST_F(VhdDiff, SelfTimesAddUpThroughAParentStackDeeperThanTheChild) {
  MakeBase();
  ASSERT_OK(CreateImage("vhd", child_, 0, "backing_file=base.vhd"));
  // Levels of the parent: file 0, passthrough 1, delay 2, vhd 3; the child's vhd is at level 1.
  const std::string parent = "vhd:stats=latency+delay:read=200us,stats=latency+" +
                             std::string("passthrough:stats=latency+file:") + base_ +
                             ",stats=latency";
  std::string escaped;
  for (char c : parent) {
    if (c == '+' || c == ':' || c == ',') escaped += '\\';
    escaped += c;
  }
  auto dev = Open("vhd:parent=" + escaped + "+file:" + child_);
  ASSERT_OK(dev);
  for (BlockDevice* d = dev->get(); d != nullptr; d = d->lower()) {
    d->SetStatsMode(StatsMode::kLatency);
  }
  const size_t len = 256 * 1024;
  EXPECT_EQ(ReadBytes(**dev, 0, len),
            std::vector<unsigned char>(model_.begin(), model_.begin() + len));
  const LayerStats st = (*dev)->Stats();
  ASSERT_GT(st.paths.requests, 0u);
  uint64_t levels = 0;
  for (uint64_t v : st.paths.self_ns) levels += v;
  EXPECT_EQ(levels, st.paths.total_ns);
  EXPECT_EQ(st.paths.total_ns, st.latency_of(Op::kRead).sum());
  EXPECT_GE(st.paths.self_ns[1], 200'000u) << "the parent's delay is the child's own time";
}

TEST_F(VhdDiff, PartialWritesKeepTheParentsSectorsAndReadsCoalesce) {
  MakeBase();
  ASSERT_OK(CreateImage("vhd", child_, 0, "backing_file=base.vhd"));
  {
    auto dev = OpenImage(child_);
    ASSERT_OK(dev);
    // Partial writes: inside a parent block, across a block boundary, where the parent has
    // nothing, and one sector at the end.
    for (auto [at, len, seed] : {std::tuple<uint64_t, size_t, uint32_t>{1536, 3584, 11},
                                 {2 * kMiB - 4096, 12288, 12},
                                 {7 * kMiB + 512, 1024, 13},
                                 {model_.size() - 512, 512, 14}}) {
      const auto d = Random(len, seed);
      WriteBytes(**dev, at, d);
      Put(model_, at, d);
    }
    EXPECT_EQ(ReadBytes(**dev, 0, model_.size()), model_);
  }
  auto dev = OpenImage(child_);  // after reopening (read-only: `vstack check` runs below)
  ASSERT_OK(dev);
  EXPECT_EQ(ReadBytes(**dev, 0, model_.size()), model_);
  // A 1 MiB read over a block the child does not have is one parent read, not 2,048; one
  // over a partially written block is one read per run.
  const uint64_t before = Counter(**dev, "parent_reads");
  EXPECT_EQ(ReadBytes(**dev, 10 * kMiB, kMiB), std::vector<unsigned char>(
                                                   model_.begin() + 10 * kMiB,
                                                   model_.begin() + 11 * kMiB));
  EXPECT_EQ(Counter(**dev, "parent_reads") - before, 1u);
  const uint64_t data_before = Counter(**dev, "data_reads");
  ReadBytes(**dev, 0, kMiB);  // parent [0,1536), child [1536,5120), parent [5120, 1M)
  EXPECT_EQ(Counter(**dev, "parent_reads") - before, 3u);
  EXPECT_EQ(Counter(**dev, "data_reads") - data_before, 1u);
  dev->reset();
  const CommandResult check = RunVstack("check " + child_);
  EXPECT_EQ(check.status, 0) << check.output;
}

TEST_F(VhdDiff, WriteZeroesHidesTheParent) {
  MakeBase();
  ASSERT_OK(CreateImage("vhd", child_, 0, "backing_file=base.vhd"));
  auto dev = OpenImage(child_);
  ASSERT_OK(dev);
  EXPECT_FALSE((*dev)->Has(kCapWriteZeroes)) << "emulated with writes, which set the bits";
  SyncIo io(**dev);
  ASSERT_FALSE(io.WriteZeroes(0, 3 * kMiB));
  std::fill(model_.begin(), model_.begin() + 3 * kMiB, 0);
  EXPECT_EQ(ReadBytes(**dev, 0, model_.size()), model_);
}

TEST_F(VhdDiff, ExtentsComeFromTheLevelThatHoldsTheData) {
  MakeBase();
  ASSERT_OK(CreateImage("vhd", child_, 0, "backing_file=base.vhd"));
  auto dev = OpenImage(child_);
  ASSERT_OK(dev);
  std::vector<Extent> ext;
  ASSERT_OK((*dev)->MapExtents(0, model_.size(), &ext));
  // The parent's data at 0..2M is data, not a hole, seen through the child.
  ASSERT_FALSE(ext.empty());
  EXPECT_EQ(ext[0].offset, 0u);
  EXPECT_EQ(ext[0].flags, 0u);
  EXPECT_GE(ext[0].length, 2 * kMiB);
}

TEST_F(VhdDiff, ChainOf64LevelsOpensAndReads) {
  ASSERT_OK(CreateImage("vhd", base_, 4 * kMiB, "block_size=512K"));
  std::vector<unsigned char> model;
  {
    auto dev = OpenImage(base_);
    ASSERT_OK(dev);
    model.assign((*dev)->geometry().size_bytes, 0);
    const auto d = Random(model.size(), 99);
    WriteBytes(**dev, 0, d);
    model = d;
  }
  std::string parent = "base.vhd";
  for (int level = 1; level < 64; ++level) {
    const std::string name = "l" + std::to_string(level) + ".vhd";
    ASSERT_OK(CreateImage("vhd", dir_.File(name), 0, "backing_file=" + parent));
    auto dev = OpenImage(dir_.File(name));
    ASSERT_OK(dev) << level;
    // Each level overwrites one sector, at a different place.
    const uint64_t at = (static_cast<uint64_t>(level) * 61 * 512) % model.size();
    const auto d = Random(512, static_cast<uint32_t>(level));
    WriteBytes(**dev, at, d);
    Put(model, at, d);
    parent = name;
  }
  auto top = OpenImage(dir_.File(parent));
  ASSERT_OK(top);
  PropertyList props;
  (*top)->Properties(props);
  bool found = false;
  for (const Property& p : props) {
    if (p.key == "chain_depth") {
      EXPECT_EQ(std::get<uint64_t>(p.value), 63u);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(ReadBytes(**top, 0, model.size()), model);
}

TEST_F(VhdDiff, MissingParentIsAClearError) {
  MakeBase();
  ASSERT_OK(CreateImage("vhd", child_, 0, "backing_file=base.vhd"));
  std::filesystem::rename(base_, dir_.File("moved.vhd"));
  auto dev = OpenImage(child_);
  ASSERT_FALSE(dev.has_value());
  EXPECT_NE(dev.error().message.find("parent 'base.vhd'"), std::string::npos)
      << dev.error().message;
  EXPECT_NE(dev.error().message.find("not found"), std::string::npos) << dev.error().message;
  // An explicit parent stack finds it anywhere.
  auto named = Open("vhd:parent=vhd\\+file\\:" + dir_.File("moved.vhd") + "+file:" + child_);
  ASSERT_OK(named);
  EXPECT_EQ(ReadBytes(**named, 0, model_.size()), model_);
}

TEST_F(VhdDiff, MismatchedParentNamesBothValuesAndCanBeForced) {
  MakeBase();
  ASSERT_OK(CreateImage("vhd", child_, 0, "backing_file=base.vhd"));
  // Replace the parent with another image at the same path.
  std::filesystem::remove(base_);
  ASSERT_OK(CreateImage("vhd", base_, 16 * kMiB));
  auto other = OpenImage(base_);
  ASSERT_OK(other);
  const std::string other_uuid = TextProperty(**other, "uuid");
  other->reset();
  auto dev = OpenImage(child_);
  ASSERT_FALSE(dev.has_value());
  EXPECT_NE(dev.error().message.find("expects parent unique ID"), std::string::npos)
      << dev.error().message;
  EXPECT_NE(dev.error().message.find(other_uuid), std::string::npos) << dev.error().message;
  auto forced = Open("vhd:parent_check=off+file:" + child_);
  ASSERT_OK(forced);
  EXPECT_EQ(ReadBytes(**forced, 0, kMiB), std::vector<unsigned char>(kMiB, 0));
}

TEST_F(VhdDiff, TimeStampMismatchIsAnErrorUnlessOnlyTheUuidIsChecked) {
  MakeBase();
  ASSERT_OK(CreateImage("vhd", child_, 0, "backing_file=base.vhd"));
  auto bytes = ReadAll(child_);
  PutBE32(bytes, 512 + 56, BE32(bytes, 512 + 56) - 10);
  FixHeaderChecksum(bytes, 512);
  WriteAll(child_, bytes);
  auto dev = OpenImage(child_);
  ASSERT_FALSE(dev.has_value());
  EXPECT_NE(dev.error().message.find("time stamp"), std::string::npos) << dev.error().message;
  ASSERT_OK(Open("vhd:parent_check=uuid+file:" + child_));
}

TEST_F(VhdDiff, ParentLoopIsAClearError) {
  MakeBase();
  ASSERT_OK(CreateImage("vhd", child_, 0, "backing_file=base.vhd"));
  // A child of child.vhd replaces base.vhd: child -> base -> child.
  ASSERT_OK(CreateImage("vhd", dir_.File("loop.vhd"), 0, "backing_file=child.vhd"));
  std::filesystem::rename(dir_.File("loop.vhd"), base_);
  auto dev = Open("vhd:parent_check=off+file:" + child_);
  ASSERT_FALSE(dev.has_value());
  EXPECT_NE(dev.error().message.find("loops"), std::string::npos) << dev.error().message;
}

TEST_F(VhdDiff, LocatorsOutsideTheFileOrHugeAreReportedNotRead) {
  MakeBase();
  const std::string sub = dir_.File("sub");
  std::filesystem::create_directory(sub);
  const std::string child = sub + "/c.vhd";
  ASSERT_OK(CreateImage("vhd", child, 0, "backing_file=../base.vhd"));
  ASSERT_OK(OpenImage(child));
  auto bytes = ReadAll(child);
  // Locator 0 (W2ku) points past the end; locator 1 (W2ru) claims 4 GiB; locator 2 (MacX) is
  // cleared. The parent name alone (in the child's directory) does not find ../base.vhd.
  PutBE64(bytes, 512 + 576 + 16, 1ull << 40);
  PutBE32(bytes, 512 + 576 + 24 + 8, 0xFFFFFFFF);
  PutBE32(bytes, 512 + 576 + 48, 0);
  FixHeaderChecksum(bytes, 512);
  WriteAll(child, bytes);
  auto dev = OpenImage(child);
  ASSERT_FALSE(dev.has_value());
  EXPECT_NE(dev.error().message.find("not inside the file"), std::string::npos)
      << dev.error().message;
  EXPECT_NE(dev.error().message.find("data length 4294967295"), std::string::npos)
      << dev.error().message;
}

TEST_F(VhdDiff, DifferencingOnAMemoryDeviceNeedsAnExplicitParent) {
  MakeBase();
  ASSERT_OK(CreateImage("vhd", child_, 0, "backing_file=base.vhd"));
  const auto bytes = ReadAll(child_);
  auto mem = Open("memory:" + std::to_string(bytes.size()));
  ASSERT_OK(mem);
  WriteBytes(**mem, 0, bytes);
  auto dev = vhd::VhdDevice::Open(std::move(*mem));
  ASSERT_FALSE(dev.has_value());
  EXPECT_NE(dev.error().message.find("vhd:parent=SPEC"), std::string::npos)
      << dev.error().message;
}

}  // namespace
}  // namespace vstack::testing

namespace vstack::testing {
namespace {

// The chain tools through the CLI: create -b, info --backing-chain, map levels, commit, a safe
// rebase that keeps the content, an unsafe one that only changes the link.
TEST_F(VhdDiff, CliCreateInfoMapCommitRebase) {
  MakeBase();
  const std::string mid = dir_.File("mid.vhd"), other = dir_.File("other.vhd");
  ASSERT_EQ(RunVstack("create -f vhd -b base.vhd -F vhd " + mid).status, 0);
  ASSERT_EQ(RunVstack("create -f vhd -b mid.vhd " + child_).status, 0);
  ASSERT_OK(CreateImage("vhd", other, 16 * kMiB));
  {
    auto dev = OpenImage(child_);
    ASSERT_OK(dev);
    const auto d = Random(8192, 21);
    WriteBytes(**dev, 4 * kMiB + 4096, d);
    Put(model_, 4 * kMiB + 4096, d);
  }
  const CommandResult info = RunVstack("info --backing-chain --output=json " + child_);
  ASSERT_EQ(info.status, 0) << info.output;
  EXPECT_EQ(std::count(info.output.begin(), info.output.end(), '{') > 3, true);
  EXPECT_NE(info.output.find("\"vhd+file:" + dir_.File("base.vhd")), std::string::npos)
      << info.output;
  const CommandResult map = RunVstack("map --output=json " + child_);
  ASSERT_EQ(map.status, 0) << map.output;
  EXPECT_NE(map.output.find("\"depth\": 0"), std::string::npos) << map.output;
  EXPECT_NE(map.output.find("\"depth\": 2"), std::string::npos) << map.output;

  ASSERT_EQ(RunVstack("commit " + child_).status, 0);
  {
    auto dev = OpenImage(mid);  // mid now holds what the child wrote
    ASSERT_OK(dev);
    EXPECT_EQ(ReadBytes(**dev, 0, model_.size()), model_);
  }
  const CommandResult rebase = RunVstack("rebase -b other.vhd " + mid);
  ASSERT_EQ(rebase.status, 0) << rebase.output;
  {
    auto dev = OpenImage(mid);  // same content over a different (empty) parent
    ASSERT_OK(dev);
    EXPECT_EQ(ReadBytes(**dev, 0, model_.size()), model_);
  }
  ASSERT_EQ(RunVstack("rebase -u -b base.vhd " + mid).status, 0);
  auto dev = OpenImage(mid);
  ASSERT_OK(dev);
  EXPECT_EQ(TextProperty(**dev, "backing_file"), dir_.File("base.vhd"));
  dev->reset();
  EXPECT_EQ(RunVstack("check " + child_).status, 0);
}

// rebase never makes a loop: a new parent whose chain holds the child (the child itself
// included) is refused in both modes, with the loop named, and the child is left byte for byte
// as it was (safe mode used to fail with a misleading "locked" error, -u to write the loop).
TEST_F(VhdDiff, RebaseRefusesANewParentWhoseChainHoldsTheChild) {
  MakeBase();
  const std::string b = dir_.File("b.vhd"), c = dir_.File("c.vhd");
  ASSERT_EQ(RunVstack("create -f vhd -b base.vhd " + b).status, 0);
  ASSERT_EQ(RunVstack("create -f vhd -b b.vhd " + c).status, 0);
  const auto b_before = ReadAll(b), c_before = ReadAll(c);
  struct Case {
    std::string parent, loop;
  };
  for (const char* mode : {"-u ", ""}) {
    for (const Case& k :
         {Case{"c.vhd", b + " -> " + c + " -> " + b}, Case{"b.vhd", b + " -> " + b}}) {
      const std::string args = std::string("rebase ") + mode + "-b " + k.parent + " " + b;
      const CommandResult r = RunVstack(args);
      EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
      EXPECT_NE(r.output.find("the chain would loop (" + k.loop + ")"), std::string::npos)
          << args << "\n"
          << r.output;
      EXPECT_EQ(r.output.find("lock"), std::string::npos) << args << "\n" << r.output;
      EXPECT_TRUE(ReadAll(b) == b_before) << args << ": the child changed";
      EXPECT_TRUE(ReadAll(c) == c_before) << args;
    }
  }
  auto dev = OpenImage(c);  // the chain still opens
  ASSERT_OK(dev);
  EXPECT_EQ(ReadBytes(**dev, 0, model_.size()), model_);
}

// create -b never makes a loop either: an image that would replace (--overwrite) a file of its
// own backing chain, itself included, is refused and the file stays as it was.
TEST_F(VhdDiff, CreateRefusesToReplaceAFileOfItsOwnBackingChain) {
  MakeBase();
  ASSERT_EQ(RunVstack("create -f vhd -b base.vhd " + child_).status, 0);
  const auto base_before = ReadAll(base_), child_before = ReadAll(child_);
  for (const auto& [args, loop] : std::vector<std::pair<std::string, std::string>>{
           {"create --overwrite -f vhd -b child.vhd " + child_, child_ + " -> " + child_},
           {"create --overwrite -f vhd -b child.vhd " + base_,
            base_ + " -> " + child_ + " -> " + base_}}) {
    const CommandResult r = RunVstack(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;  // create: a bad -b is a usage error
    EXPECT_NE(r.output.find("the chain would loop (" + loop + ")"), std::string::npos)
        << args << "\n"
        << r.output;
    EXPECT_TRUE(ReadAll(base_) == base_before) << args;
    EXPECT_TRUE(ReadAll(child_) == child_before) << args;
  }
  // VHDX has no differencing images: -b says so, rather than naming an internal option.
  for (const char* format : {"vhdx", "raw"}) {
    const CommandResult x = RunVstack(std::string("create -f ") + format + " -b child.vhd " +
                                      dir_.File("x.img") + " 8M");
    EXPECT_EQ(x.status, 2) << x.output;
    EXPECT_NE(x.output.find("-b: format '" + std::string(format) +
                            "' has no differencing images (formats with a backing file: vhd)"),
              std::string::npos)
        << x.output;
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_.path()),
                          std::filesystem::directory_iterator()),
            2)
      << "no temporary file left behind";
  EXPECT_EQ(RunVstack("check " + child_).status, 0);
}

// VHDX has no differencing images in vstack: commit and rebase name a VHDX image as such
// (rather than "no footer ('conectix' cookie)"), and change nothing.
TEST_F(VhdDiff, CommitAndRebaseSayAVhdxImageIsNotAVhd) {
  MakeBase();
  ASSERT_EQ(RunVstack("create -f vhd -b base.vhd " + child_).status, 0);
  const std::string x = dir_.File("x.vhdx");
  ASSERT_OK(CreateImage("vhdx", x, 8 * kMiB));
  const auto x_before = ReadAll(x), child_before = ReadAll(child_);
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"rebase -u -b base.vhd " + x, "the child '" + x + "' is a vhdx image"},
           {"rebase -b x.vhdx " + child_, "the new parent '" + x + "' is a vhdx image"},
           {"commit " + x, "the child '" + x + "' is a vhdx image"}}) {
    const CommandResult r = RunVstack(args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << args << "\n" << r.output;
  }
  EXPECT_TRUE(ReadAll(x) == x_before);
  EXPECT_TRUE(ReadAll(child_) == child_before);
}

}  // namespace
}  // namespace vstack::testing
