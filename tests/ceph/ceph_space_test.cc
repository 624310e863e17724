// `vstack space --mode=ceph` on a real cluster: the images replayed onto a size-2 replicated pool
// and an EC 2+1 pool, the pools' USED and STORED read from `ceph df detail` before and after.
// CephSpace needs the cluster of tests/ceph/with-cluster started with BlueStore OSDs and a
// ceph-mgr (`with-cluster --store bluestore --mgr`, ctest entry ceph-space; pools rbd, size 2,
// and ec21); CephSpaceRefusal runs on the `ceph` entry's cluster, which has no mgr.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

// Writes `length` bytes from a seeded Rng at `offset` of the sparse file `path` of `size` bytes.
void PutRandom(const std::string& path, uint64_t size, uint64_t offset, size_t length,
               uint64_t seed) {
  std::vector<char> data(length);
  Rng(seed).Fill(data.data(), data.size());
  if (!std::filesystem::exists(path)) std::ofstream(path, std::ios::binary);
  std::filesystem::resize_file(path, size);
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(f.flush()) << path;
}

class CephSpace : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(std::getenv("CEPH_CONF"), nullptr) << "run through tests/ceph/with-cluster";
    // Two images, 10 MiB of incompressible data in all: extents of whole and partial RBD
    // objects (4 MiB), one ending mid-object.
    const std::string a = dir_.File("a.img"), b = dir_.File("b.img");
    PutRandom(a, 16 << 20, 0, 6 << 20, 1);
    PutRandom(b, 16 << 20, 4 << 20, (3 << 20) + (512 << 10), 2);
    PutRandom(b, 16 << 20, 12 << 20, 512 << 10, 3);
    images_ = " " + a + " " + b;
  }

  nlohmann::json Measure(const std::string& args) {
    CommandResult r = RunVstack("space --mode=ceph --output=json " + args + images_);
    EXPECT_EQ(r.status, 0) << args << "\n" << r.output;
    nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.output;
    return j;
  }

  TempDir dir_;
  std::string images_;
};

const nlohmann::json& PoolOf(const nlohmann::json& j, const std::string& pool) {
  for (const auto& p : j["ceph"]["pools"]) {
    if (p["pool"] == pool) return p;
  }
  static const nlohmann::json none;
  ADD_FAILURE() << "no pool " << pool << " in " << j.dump();
  return none;
}

// The plain stack (rbd: alone) writes exactly the images' data, so STORED must match it within
// the allocation granularity, and USED/STORED must be the scheme's factor plus the partly
// filled allocation units.
TEST_F(CephSpace, ReplicatedAndEcFactorsAreTheSchemesWithinTheAllocationUnits) {
  const nlohmann::json j = Measure("--dedup=off --codec=none --pool rbd --pool ec21");
  ASSERT_TRUE(j.contains("ceph")) << j.dump();
  const uint64_t logical = j["ceph"]["logical_bytes"];
  EXPECT_EQ(logical, (10u << 20));
  const uint64_t unit = j["ceph"]["min_alloc_size"];
  EXPECT_EQ(unit, 4096u) << "Debian's 16.2 BlueStore allocates 4 KiB units on HDD and SSD";

  const nlohmann::json& rep = PoolOf(j, "rbd");
  EXPECT_EQ(rep["scheme"], "replicated size 2");
  EXPECT_EQ(rep["modelled_factor"], 2.0);
  EXPECT_EQ(rep["written_bytes"], logical);
  // Objects: the 4 MiB RBD objects the extents touch (the images lie one after the other:
  // 0-6 MiB and 20-23.5, 28-28.5 MiB: objects 0, 1, 5, 7), plus the image's id, header and
  // object map objects.
  const int64_t objects = rep["delta"]["objects"];
  EXPECT_GE(objects, 4 + 2);
  EXPECT_LE(objects, 4 + 4);
  // STORED is the data written, plus at most the small metadata objects (the id and the object
  // map, each under one allocation unit).
  const int64_t stored = rep["delta"]["stored_data"];
  EXPECT_GE(stored, int64_t(logical));
  EXPECT_LE(stored, int64_t(logical) + 4 * 4096);
  const double rep_factor = rep["measured_factor"];
  EXPECT_GE(rep_factor, 1.99) << rep.dump(2);
  EXPECT_LE(rep_factor, 2.05) << rep.dump(2);

  const nlohmann::json& ec = PoolOf(j, "ec21");
  EXPECT_EQ(ec["scheme"], "EC 2+1");
  EXPECT_EQ(ec["modelled_factor"], 1.5);
  EXPECT_EQ(ec["stripe_unit"], 4096u);
  EXPECT_EQ(ec["delta"]["objects"], 4) << "only data objects: the header is in pool rbd";
  // Every extent ends on a stripe (8 KiB), so no padding: STORED is what was written.
  const int64_t ec_stored = ec["delta"]["stored_data"];
  EXPECT_GE(ec_stored, int64_t(logical));
  EXPECT_LE(ec_stored, int64_t(logical) + 4 * 8192);
  const double ec_factor = ec["measured_factor"];
  EXPECT_GE(ec_factor, 1.49) << ec.dump(2);
  EXPECT_LE(ec_factor, 1.55) << ec.dump(2);
  EXPECT_GT(ec["metadata_pool_delta"]["used"].get<int64_t>(), 0)
      << "the header of an EC image lives in the metadata pool";
  EXPECT_FALSE(ec["why"].empty());
  std::printf("measured USED/STORED: rbd %.4fx, ec21 %.4fx; STORED - written: %lld, %lld B\n",
              rep_factor, ec_factor, static_cast<long long>(stored - int64_t(logical)),
              static_cast<long long>(ec_stored - int64_t(logical)));

  // Nothing left behind.
  CommandResult ls = RunCommand("rbd ls rbd");
  EXPECT_EQ(ls.output.find("vstack-space-"), std::string::npos) << ls.output;
}

// Through dedup and zstd: the stack writes what its layers hold (the replay's physical bytes),
// the pool stores that plus the layers' metadata; --keep-image leaves the image for a look.
TEST_F(CephSpace, ThroughDedupAndZstdWithTheImageKept) {
  const nlohmann::json j = Measure("--pool rbd --keep-image");
  const nlohmann::json& rep = PoolOf(j, "rbd");
  EXPECT_EQ(rep["written_bytes"], j["physical"]["physical_bytes"]);
  const int64_t stored = rep["delta"]["stored_data"];
  EXPECT_GE(stored, rep["written_bytes"].get<int64_t>());
  const double factor = rep["measured_factor"];
  std::printf("measured USED/STORED through dedup+zstd: rbd %.4fx\n", factor);
  EXPECT_GE(factor, 1.99) << rep.dump(2);
  EXPECT_LE(factor, 2.1) << rep.dump(2);
  EXPECT_EQ(rep["kept"], true);
  const std::string image = rep["image"];
  const std::string name = image.substr(image.find('/') + 1);
  EXPECT_EQ(RunCommand("rbd info rbd/" + name).status, 0) << image;
  EXPECT_EQ(RunCommand("rbd rm --no-progress rbd/" + name).status, 0) << image;
}

// On the `ceph` entry's cluster (memstore OSDs, no mgr): refused with the fix, before anything
// is written.
TEST(CephSpaceRefusal, WithoutAManagerNamesTheFix) {
  if (RunCommand("ceph mgr stat | grep -q '\"available\": true'").status == 0) {
    GTEST_SKIP() << "this cluster has a ceph-mgr";
  }
  TempDir dir;
  WriteFile(dir.File("a.img"), 1 << 20, 0x5A);
  CommandResult r = RunVstack("space --mode=ceph --pool rbd " + dir.File("a.img"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("has no active ceph-mgr"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tools/ceph-up --mgr"), std::string::npos) << r.output;
  CommandResult ls = RunCommand("rbd ls rbd");
  EXPECT_EQ(ls.output.find("vstack-space-"), std::string::npos) << ls.output;
}

}  // namespace
}  // namespace vstack::testing
