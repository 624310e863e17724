// The read side and the index of the exact scan of `vstack space`: the read-ahead pipeline hands
// every grain of every data extent to exactly one visit (zero extents and holes never), a read
// error stops it with the image and offset named; the fingerprint set counts distinct
// fingerprints exactly from several threads, the all-zero fingerprint included.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "analysis/space/space_fingerprint_set.h"
#include "analysis/space/space_images.h"
#include "analysis/space/space_reader.h"
#include "tests/testing/test_util.h"

namespace vstack {
namespace {

constexpr uint32_t kGrain = 4096;

// A sparse file of `size` bytes with grain-sized, non-zero data at each offset in `at`: the
// grain's first 8 bytes hold its offset.
void MakeImage(const std::string& path, uint64_t size, const std::vector<uint64_t>& at) {
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
  std::vector<char> g(kGrain, 'x');
  for (uint64_t off : at) {
    std::memcpy(g.data(), &off, 8);
    ASSERT_EQ(::pwrite(fd, g.data(), kGrain, static_cast<off_t>(off)), ssize_t{kGrain});
  }
  ::close(fd);
}

TEST(SpaceReader, VisitsEveryDataGrainOnceAndNoHole) {
  testing::TempDir dir;
  // Two images, data in runs longer than a 4 MiB job and single grains between holes.
  std::vector<uint64_t> a, b;
  for (uint64_t off = 0; off < (9 << 20); off += kGrain) a.push_back(off);
  for (uint64_t off = 16 << 20; off < (32 << 20); off += 1 << 20) a.push_back(off);
  for (uint64_t off = 4 << 20; off < (5 << 20) + kGrain; off += kGrain) b.push_back(off);
  MakeImage(dir.File("a.img"), 32 << 20, a);
  MakeImage(dir.File("b.img"), 8 << 20, b);
  auto images = OpenSpaceImages({dir.File("a.img"), dir.File("b.img")}, kGrain);
  ASSERT_TRUE(images) << images.error().ToString();
  std::mutex mu;
  std::map<std::pair<size_t, uint64_t>, int> seen;  // (image, offset): visits
  std::set<unsigned> workers;
  auto visit = [&](unsigned w, const SpaceJob& job, const std::byte* data, uint64_t grains) {
    std::lock_guard lock(mu);
    workers.insert(w);
    for (uint64_t i = 0; i < grains; ++i) {
      const uint64_t off = job.offset + i * kGrain;
      uint64_t held;
      std::memcpy(&held, data + i * kGrain, 8);
      EXPECT_EQ(held, off) << "image " << job.image;  // the data is the grain's own
      ++seen[{job.image, off}];
    }
  };
  ASSERT_TRUE(ReadImageGrains(*images, 2, kGrain, visit, nullptr));
  std::map<std::pair<size_t, uint64_t>, int> want;
  for (uint64_t off : a) want[{0, off}] = 1;
  for (uint64_t off : b) want[{1, off}] = 1;
  EXPECT_EQ(seen, want);
  EXPECT_LE(workers.size(), 2u);
}

TEST(SpaceReader, AReadErrorStopsThePassNamingImageAndOffset) {
  testing::TempDir dir;
  std::vector<uint64_t> at;
  for (uint64_t off = 0; off < (24 << 20); off += kGrain) at.push_back(off);
  MakeImage(dir.File("a.img"), 24 << 20, at);
  const std::string spec = "error:ops=read,offset=12M,length=4K+file:" + dir.File("a.img");
  auto images = OpenSpaceImages({spec}, kGrain);
  ASSERT_TRUE(images) << images.error().ToString();
  auto visit = [](unsigned, const SpaceJob&, const std::byte*, uint64_t) {};
  Status s = ReadImageGrains(*images, 2, kGrain, visit, nullptr);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find(spec + ": cannot read offset 12582912"), std::string::npos)
      << s.error().message;
}

TEST(FingerprintSet, CountsDistinctFingerprintsExactlyFromSeveralThreads) {
  // Fingerprints that collide in the probing bits (equal lo) and the empty-slot pattern (0, 0).
  std::vector<Fingerprint> fps;
  testing::Rng rng(7);
  for (int i = 0; i < 50000; ++i) fps.push_back({rng.Next(), rng.Next()});
  for (uint64_t i = 0; i < 100; ++i) fps.push_back({42, i});
  fps.push_back({0, 0});
  FingerprintSet set;
  std::atomic<uint64_t> firsts{0};
  auto insert = [&](int t) {
    for (int round = 0; round < 2; ++round) {  // every fingerprint twice per thread
      for (size_t i = t; i < fps.size() + t; ++i) firsts += set.Insert(fps[i % fps.size()]);
    }
  };
  std::thread t1(insert, 0), t2(insert, 1000);
  t1.join();
  t2.join();
  EXPECT_EQ(firsts.load(), fps.size());
  EXPECT_EQ(set.size(), fps.size());
}

}  // namespace
}  // namespace vstack
