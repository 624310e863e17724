// The zstd layer: stored-size rules, the codec, and the device's accounting against the codec
// and the rules applied by hand (the property `vstack space` relies on), for every rule and
// for queues compressing on several threads at once.
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <cstring>
#include <thread>

#include "blockdev/zstd/grain_codec.h"
#include "blockdev/zstd/size_rule.h"
#include "blockdev/zstd/zstd_device.h"
#include "lib/iovec.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/crash_workload.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

SizeRule Rule(const char* text) {
  auto r = ParseSizeRule(text);
  EXPECT_TRUE(r.has_value()) << text;
  return r ? *r : SizeRule{};
}

// The space figures, the properties and the check of a huge, nearly empty zstd device walk the
// map blocks written, not every virtual grain: a 64 GiB device's map is 128 MiB (8 bytes per
// grain), and reading all of it made `vstack info` of an empty 1 TiB zstd device take 2 GB of
// memory and 9 s. Memory, not time, is what the test measures: deterministic.
TEST(ZstdDevice, ReportsAndChecksCostWhatWasWrittenNotTheVirtualSize) {
  auto dev = Open("zstd:format=on,size=64G+memory:512M");
  ASSERT_OK(dev);
  {
    SyncIo io(**dev);
    AlignedBuffer b(1 << 20);
    std::memset(b.data(), 'z', b.size());
    ASSERT_OK(io.Write(40ull << 30, b.span()));
    ASSERT_OK(io.Flush());
  }
  const uint64_t before = ResidentBytes();
  const SpaceUsage s = *(*dev)->Space();
  EXPECT_EQ(s.logical_bytes_live, 1u << 20);
  PropertyList props;
  (*dev)->Properties(props);
  CheckResult check;
  ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &check));
  EXPECT_EQ(check.corruptions, 0u);
  // (Not `after - before`: the walks may free more than they take, and the unsigned
  // difference then wrapped to 2^64 - 13 MB under AddressSanitizer.)
  EXPECT_LT(ResidentBytes(), before + (uint64_t{32} << 20))
      << "the walks touched the map of every virtual grain";
}

TEST(SizeRule, EveryRuleAtItsBoundaries) {
  struct Case {
    const char* rule;
    uint32_t compressed;
    bool keep;
    uint32_t slot;
  };
  for (const Case& c : std::vector<Case>{
           {"vsan-osa", 2048, true, 2048}, {"vsan-osa", 2049, false, 4096},
           {"vsan-osa", 10, true, 2048},   {"sector", 1, true, 512},
           {"sector", 3584, true, 3584},   {"sector", 3585, false, 4096},
           {"packed", 4095, true, 4095},   {"packed", 77, true, 77},
           {"min-saving=12.5", 3584, true, 3584}, {"min-saving=12.5", 3585, false, 4096},
           {"min-saving=50", 2048, true, 2048},   {"min-saving=50", 2049, false, 4096},
           {"min-saving=0", 3585, false, 4096},   {"sector", 0, false, 4096},
       }) {
    const StoredForm f = ApplySizeRule(Rule(c.rule), 4096, c.compressed);
    EXPECT_EQ(f.compressed, c.keep) << c.rule << " " << c.compressed;
    EXPECT_EQ(f.slot, c.slot) << c.rule << " " << c.compressed;
  }
  EXPECT_EQ(ApplySizeRule(Rule("vsan-osa"), 65536, 30000).slot, 32768u);
  for (const char* t : {"vsan-osa", "sector", "packed", "min-saving=12.5", "min-saving=7"}) {
    EXPECT_EQ(FormatSizeRule(Rule(t)), t);
  }
  EXPECT_FALSE(ParseSizeRule("min-saving=abc"));
  EXPECT_FALSE(ParseSizeRule("half"));
}

// What a rule displays as is what the parser accepts, and means the same rule; a percentage
// finer than the stored 0.01 % steps is refused rather than rounded (99.999 once became 100).
TEST(SizeRule, DisplayedFormParsesBackToTheSameRule) {
  for (const char* t : {"min-saving=0", "min-saving=0.01", "min-saving=12.5", "min-saving=33.33",
                        "min-saving=99.99", "packed"}) {
    const SizeRule r = Rule(t);
    auto again = ParseSizeRule(FormatSizeRule(r));
    ASSERT_TRUE(again) << t << " -> " << FormatSizeRule(r) << ": " << again.error().ToString();
    EXPECT_EQ(again->kind, r.kind) << t;
    EXPECT_EQ(again->min_saving_bp, r.min_saving_bp) << t;
  }
  for (const char* t : {"min-saving=99.999", "min-saving=12.345", "min-saving=100"}) {
    auto r = ParseSizeRule(t);
    ASSERT_FALSE(r) << t << " parsed as " << FormatSizeRule(*r);
    EXPECT_NE(r.error().message.find("steps of 0.01"), std::string::npos) << r.error().message;
  }
}

TEST(GrainCodec, RoundTripsAndGivesUpOnIncompressibleData) {
  GrainCompressor fast(-5), normal(3);
  GrainDecompressor dec;
  std::vector<unsigned char> text(4096), random(4096), out(4096), back(4096);
  Rng rng(1);
  for (size_t i = 0; i < text.size(); ++i) text[i] = "the quick brown fox "[i % 20];
  rng.Fill(random.data(), random.size());
  for (GrainCompressor* c : {&fast, &normal}) {
    const uint32_t n = c->Compress(text.data(), 4096, out.data());
    ASSERT_GT(n, 0u);
    EXPECT_LT(n, 200u);
    ASSERT_TRUE(dec.Decompress(out.data(), n, back.data(), 4096));
    EXPECT_EQ(back, text);
    EXPECT_EQ(c->Compress(random.data(), 4096, out.data()), 0u);  // stored raw
  }
  const uint32_t n = normal.Compress(text.data(), 4096, out.data());
  std::vector<unsigned char> big(8192);
  EXPECT_FALSE(dec.Decompress(out.data(), n, big.data(), big.size()));  // not exactly a grain
  out[n / 2] ^= 0xFF;
  std::fill(back.begin(), back.end(), 0);
  EXPECT_FALSE(dec.Decompress(out.data(), n, back.data(), 4096) && back == text);
}

// What the layer must report for `data` written in whole grains: the codec and the rule applied
// grain by grain.
SpaceUsage Expected(const std::vector<unsigned char>& data, int level, const char* rule) {
  GrainCompressor c(level);
  std::vector<unsigned char> out(4096);
  SpaceUsage s;
  for (size_t at = 0; at < data.size(); at += 4096) {
    s.logical_bytes_live += 4096;
    if (IsZero(&data[at], 4096)) {
      ++s.zero_grains;
      continue;
    }
    ++s.unique_grains;
    const uint32_t n = c.Compress(&data[at], 4096, out.data());
    const StoredForm f = ApplySizeRule(Rule(rule), 4096, n);
    s.compressed_bytes += f.compressed ? n : 4096;
    s.stored_bytes += f.slot;
  }
  return s;
}

class ZstdRules : public ::testing::TestWithParam<const char*> {};

TEST_P(ZstdRules, AccountingMatchesTheCodecAndTheRuleGrainByGrain) {
  std::vector<unsigned char> data(4 << 20);
  WorkloadRng rng(5);
  FillMixed(rng, data.data(), data.size());
  auto dev = Open(std::string("zstd:level=3,rule=") + GetParam() + "+memory:64M");
  ASSERT_OK(dev);
  // Written by four threads at once, each through its own queue (and its own open bin).
  std::atomic<int> failures{0};
  auto worker = [&](int t) {
    auto q = (*dev)->OpenQueue();
    if (!q) return (void)++failures;
    const size_t part = data.size() / 4;
    AlignedBuffer b(part);
    std::memcpy(b.data(), &data[t * part], part);
    std::vector<IoRequest> reqs(part / 65536);
    std::vector<iovec> iov(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      iov[i] = iovec{b.data() + i * 65536, 65536};
      reqs[i].op = Op::kWrite;
      reqs[i].offset = t * part + i * 65536;
      reqs[i].length = 65536;
      reqs[i].iov = &iov[i];
      reqs[i].iovcnt = 1;
    }
    RunBatch(**q, reqs);
    for (auto& r : reqs) failures += r.status ? 1 : 0;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  const SpaceUsage want = Expected(data, 3, GetParam());
  const SpaceUsage got = *(*dev)->Space();
  EXPECT_EQ(got.logical_bytes_live, want.logical_bytes_live);
  EXPECT_EQ(got.zero_grains, want.zero_grains);
  EXPECT_EQ(got.unique_grains, want.unique_grains);
  EXPECT_EQ(got.compressed_bytes, want.compressed_bytes);
  EXPECT_EQ(got.stored_bytes, want.stored_bytes);
  EXPECT_GE(got.physical_bytes_used, got.stored_bytes);  // packing waste, at most one bin per queue
  EXPECT_LE(got.physical_bytes_used, got.stored_bytes + got.stored_bytes / 4 + 4 * 4096);
  SyncIo io(**dev);
  AlignedBuffer back(data.size());
  ASSERT_OK(io.Read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
  const CheckResult c = CheckStack(**dev);
  EXPECT_EQ(c.corruptions + c.leaks, 0u) << (c.messages.empty() ? "" : c.messages[0]);
}

INSTANTIATE_TEST_SUITE_P(Rules, ZstdRules,
                         ::testing::Values("vsan-osa", "sector", "packed", "min-saving=12.5"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n;
                           for (const char* c = i.param; *c; ++c) n += std::isalnum(*c) ? *c : '_';
                           return n;
                         });

// Overwrites release fragments; a bin whose fragments all died is reused after a commit.
TEST(ZstdDevice, OverwrittenFragmentsFreeTheirBins) {
  auto dev = Open("zstd:rule=packed+memory:64M");
  ASSERT_OK(dev);
  SyncIo io(**dev);
  std::vector<unsigned char> data(1 << 20);
  for (int round = 0; round < 6; ++round) {
    WorkloadRng rng(round);
    FillMixed(rng, data.data(), data.size());
    AlignedBuffer b(data.size());
    std::memcpy(b.data(), data.data(), data.size());
    ASSERT_OK(io.Write(0, b.span()));
    ASSERT_OK(io.Flush());
  }
  const SpaceUsage s = *(*dev)->Space();
  // Six rounds over the same megabyte: dead bins were freed, not piled up.
  EXPECT_LE(s.physical_bytes_used, 2u * (1 << 20));
  const CheckResult c = CheckStack(**dev);
  EXPECT_EQ(c.corruptions + c.leaks, 0u) << (c.messages.empty() ? "" : c.messages[0]);
}

// A bin's image is not cleared when the packer takes a bin (a memset of a whole grain per new
// bin was most of the pack phase's cost): what goes below past a fragment must still be zeros,
// also where the reused image held other fragments. Small fragments first fill bins slot after
// slot (one open bin, so that its images are reused); then fragments of about half a grain go
// to new bins over the same images, and the rest of each such bin's lower block (4 KiB) reads as
// zeros.
TEST(ZstdDevice, WhatGoesBelowPastAFragmentIsZerosOverAReusedImage) {
  auto mem = Open("memory:16M,block=4096");
  ASSERT_OK(mem);
  BlockDevice* memory = mem->get();
  auto dev = OpenLayersOn("zstd:open_bins=1", std::move(*mem));
  ASSERT_OK(dev);
  SyncIo io(**dev);
  AlignedBuffer grain(4096, 4096);
  for (int i = 0; i < 64; ++i) {  // about 20 bytes each: 8 slots of 512 per bin
    std::memset(grain.data(), i + 1, 4096);
    ASSERT_OK(io.Write(uint64_t(i) * 4096, grain.span()));
  }
  WorkloadRng rng(7);
  for (int i = 64; i < 128; ++i) {  // half random: about 2.1 KiB, one per bin
    rng.Fill(grain.data(), 2048);
    std::memset(grain.data() + 2048, 0, 2048);
    ASSERT_OK(io.Write(uint64_t(i) * 4096, grain.span()));
  }
  ASSERT_OK(io.Flush());
  const std::vector<unsigned char> below = ReadAll(*memory);
  const unsigned char magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
  auto frame_at = [&](size_t at) { return std::memcmp(&below[at], magic, 4) == 0; };
  int big = 0;
  for (size_t b = 0; b + 4096 <= below.size(); b += 4096) {
    if (!frame_at(b) || frame_at(b + 512)) continue;
    ++big;  // one large fragment at the bin's start: the rest of the block is padding
    for (size_t k = 2560; k < 4096; ++k) {
      ASSERT_EQ(below[b + k], 0) << "bin at " << b << ", byte " << k;
    }
  }
  EXPECT_GE(big, 60);
}

}  // namespace
}  // namespace vstack::testing
