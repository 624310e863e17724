// The metadata layers (dedup, zstd, crc32c and their MetaStore) against the ways issue 11 found
// to lose data or memory: formatting a device nobody asked to format, a repair below a layer
// that leaves its queues dangling, a forged journal that claims gigabytes, a reference count
// that could overflow.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>

#include "bench/workload/runner.h"
#include "blockdev/dedup/dedup_device.h"
#include "blockdev/memory/memory_device.h"
#include "blockdev/metastore/meta_store.h"
#include "lib/aligned_buffer.h"
#include "lib/endian.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

std::vector<unsigned char> FileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// 8 KiB of zeros, then 4 MiB of data: what many real disks look like to a superblock probe
// (ZFS labels, for one). Returns the bytes written.
std::vector<unsigned char> WriteZeroHeadedDisk(const std::string& path) {
  Rng rng(11);
  std::vector<unsigned char> bytes(8192 + (4 << 20), 0);
  rng.Fill(bytes.data() + 8192, 4 << 20);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

// Issue 11 item 3, first recipe: `check -r leaks crc32c+file:x.img` zeroed the whole disk.
TEST(ExplicitFormat, CheckRepairDoesNotFormatADiskWhoseFirst8KiBAreZero) {
  TempDir dir;
  const std::string path = dir.File("x.img");
  const std::vector<unsigned char> before = WriteZeroHeadedDisk(path);
  for (const char* layer : {"crc32c", "dedup", "zstd"}) {
    CommandResult r = RunVstack("check -r leaks " + std::string(layer) + "+file:" + path);
    EXPECT_NE(r.status, 0) << layer << ": " << r.output;
    EXPECT_NE(r.output.find("format=on"), std::string::npos) << layer << ": " << r.output;
    EXPECT_TRUE(FileBytes(path) == before) << layer << " changed the disk";
  }
}

// The same disk checked without a repair: a read-only open presents a blank device as an empty
// one (it can write nothing), and `check` said "No errors were found on the image." of any
// disk whose first 8 KiB are zero, under any grain layer (under crc32c after reading all of it:
// 17 s for 16 GiB of holes). It is not the layer's device: the check says so and fails, as the
// repair's open does.
TEST(ExplicitFormat, CheckOfADiskWhoseFirst8KiBAreZeroSaysItIsNotTheLayers) {
  TempDir dir;
  const std::string path = dir.File("x.img");
  const std::vector<unsigned char> before = WriteZeroHeadedDisk(path);
  for (const char* layer : {"crc32c", "dedup", "zstd"}) {
    CommandResult r = RunVstack("check " + std::string(layer) + "+file:" + path);
    EXPECT_EQ(r.status, 1) << layer << ": " << r.output;
    EXPECT_NE(r.output.find("holds no " + std::string(layer) + " superblock"), std::string::npos)
        << layer << ": " << r.output;
    EXPECT_NE(r.output.find("nothing to check"), std::string::npos) << layer << ": " << r.output;
    EXPECT_TRUE(FileBytes(path) == before) << layer << " changed the disk";
  }
}

// Second recipe: `info 'dedup+file:x.img,create=on'` wiped half of an existing disk.
TEST(ExplicitFormat, CreateOnDoesNotFormatAFileThatAlreadyExisted) {
  TempDir dir;
  const std::string path = dir.File("x.img");
  const std::vector<unsigned char> before = WriteZeroHeadedDisk(path);
  CommandResult r = RunVstack("info 'dedup+file:" + path + ",create=on'");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("dedup:format=on+"), std::string::npos) << r.output;
  EXPECT_TRUE(FileBytes(path) == before);
  // The library refuses the same way, for every layer, with a clear error.
  for (const char* layer : {"crc32c", "dedup", "zstd"}) {
    auto dev = Open(std::string(layer) + "+file:" + path);
    ASSERT_FALSE(dev) << layer;
    EXPECT_EQ(dev.error().code, make_error_code(Errc::kNotFound)) << dev.error().message;
    EXPECT_NE(dev.error().message.find("holds no " + std::string(layer) + " superblock"),
              std::string::npos)
        << dev.error().message;
  }
  EXPECT_TRUE(FileBytes(path) == before);
}

TEST(ExplicitFormat, NewFilesAreFormattedAndFormatOnFormatsOnlyABlankDevice) {
  TempDir dir;
  // A file that this open creates is formatted, and so is every layer over a fresh one.
  const std::string fresh = dir.File("new.img");
  {
    auto dev = Open("dedup+zstd+file:" + fresh + ",create=on,size=64M");
    ASSERT_OK(dev);
    EXPECT_TRUE((*dev)->fresh());
    ASSERT_OK((*dev)->Close());
  }
  {
    auto dev = Open("dedup+zstd+file:" + fresh);  // formatted: attached, not fresh
    ASSERT_OK(dev);
    EXPECT_FALSE((*dev)->fresh());
  }
  // format=on formats a blank device that this command did not create...
  const std::string old = dir.File("old.img");
  WriteZeroHeadedDisk(old);
  {
    auto dev = Open("crc32c:format=on+file:" + old);
    ASSERT_OK(dev);
    ASSERT_OK((*dev)->Close());
  }
  // ...and never reformats a formatted one.
  auto dev = Open("crc32c:format=on+file:" + old);
  ASSERT_OK(dev);
  EXPECT_FALSE((*dev)->fresh());
}

// A disk that holds other data from its first byte (no superblock magic in either slot) is
// refused with the same advice as a zero-headed one (format=on), and format=on formats it; a
// read-only open says it is not a device of that layer. Nothing is written until format=on.
TEST(ExplicitFormat, ADiskOfOtherDataIsRefusedWithTheFormatOnAdvice) {
  TempDir dir;
  const std::string path = dir.File("data.img");
  Rng rng(12);
  std::vector<unsigned char> before(4 << 20);
  rng.Fill(before.data(), before.size());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(before.data()),
             static_cast<std::streamsize>(before.size()));
  for (const char* layer : {"crc32c", "dedup", "zstd"}) {
    const std::string name = layer;
    auto dev = Open(name + "+file:" + path);
    ASSERT_FALSE(dev) << layer;
    EXPECT_NE(dev.error().message.find("holds no " + name + " superblock but other data"),
              std::string::npos)
        << dev.error().message;
    EXPECT_NE(dev.error().message.find("add format=on to the " + name +
                                       " part of the spec, "
                                       "e.g. '" +
                                       name + ":format=on+...'"),
              std::string::npos)
        << dev.error().message;
    OpenOptions ro;
    ro.read_only = true;
    auto read_only = Open(name + "+file:" + path, ro);
    ASSERT_FALSE(read_only) << layer;
    EXPECT_NE(read_only.error().message.find("it is not a " + name + " device"), std::string::npos)
        << read_only.error().message;
    EXPECT_TRUE(FileBytes(path) == before) << layer;
    CommandResult cli = RunVstack("info --output=json '" + name + "+file:" + path + "'");
    EXPECT_NE(cli.status, 0);
    EXPECT_TRUE(FileBytes(path) == before) << layer;
  }
  auto formatted = Open("dedup:format=on+file:" + path);
  ASSERT_OK(formatted);
  ASSERT_OK((*formatted)->Close());
  auto again = Open("dedup+file:" + path);  // now a dedup device, empty
  ASSERT_OK(again);
  AlignedBuffer block(4096);
  SyncIo io(**again);
  ASSERT_OK(io.Read(0, block.span()));
  EXPECT_TRUE(std::all_of(block.span().begin(), block.span().end(),
                          [](std::byte b) { return b == std::byte{0}; }));
}

// A 512-byte MBR alone in the first 8 KiB (nothing past its first sector, like a torn first
// write of a format) was taken for a blank device: "its first 8 KiB are zero", which was false.
// It is other data: refused with the format=on advice, read-only "not a device" of the layer,
// and nothing is written. A format's torn first write (slot A starting with the magic, nothing
// past its first 1 KiB) still counts as blank, and says so.
TEST(ExplicitFormat, AnMbrAloneIsOtherDataAndATornFormatSaysSo) {
  TempDir dir;
  const std::string path = dir.File("mbr.img");
  std::vector<unsigned char> mbr(4 << 20, 0);
  for (int i = 0; i < 16; ++i) mbr[i] = static_cast<unsigned char>(0xEB + i);  // boot code
  mbr[446] = 0x80;                                                             // a partition
  mbr[510] = 0x55;
  mbr[511] = 0xAA;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(mbr.data()), static_cast<std::streamsize>(mbr.size()));
  for (const char* layer : {"crc32c", "dedup", "zstd"}) {
    const std::string name = layer;
    auto dev = Open(name + "+file:" + path);
    ASSERT_FALSE(dev) << layer;
    EXPECT_EQ(dev.error().message.find("are zero"), std::string::npos) << dev.error().message;
    EXPECT_NE(dev.error().message.find("holds no " + name + " superblock but other data"),
              std::string::npos)
        << dev.error().message;
    EXPECT_NE(dev.error().message.find("add format=on"), std::string::npos) << dev.error().message;
    auto read_only = Open(name + "+file:" + path, OpenOptions{.read_only = true});
    ASSERT_FALSE(read_only) << layer;
    EXPECT_NE(read_only.error().message.find("it is not a " + name + " device"), std::string::npos)
        << read_only.error().message;
    EXPECT_TRUE(FileBytes(path) == mbr) << layer;
  }
  // The torn first write of a dedup format: its magic, nothing past the first 1 KiB.
  const std::string torn = dir.File("torn.img");
  std::vector<unsigned char> bytes(4 << 20, 0);
  std::memcpy(bytes.data(), "VSDEDUP1", 8);
  bytes[600] = 1;
  std::ofstream(torn, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  auto dev = Open("dedup+file:" + torn);
  ASSERT_FALSE(dev);
  EXPECT_EQ(dev.error().code, make_error_code(Errc::kNotFound)) << dev.error().message;
  EXPECT_NE(dev.error().message.find("its first 8 KiB hold only the start of a dedup superblock "
                                     "that a format never finished"),
            std::string::npos)
      << dev.error().message;
  ASSERT_OK(Open("dedup:format=on+file:" + torn));
}

// Issue 11 item 2: `check -r leaks 'dedup+vhd+file:s.vhd'` after a crash of `vstack serve`. The
// VHD repair (the unused tail that the crash left reserved) rebuilt the VHD state while
// dedup's MetaStore still held a queue of the old one: hundreds of invalid reads and writes
// under valgrind (ASan: heap-use-after-free), and the file grew.
TEST(CheckRepair, RepairBelowADedupLayerLeavesNoDanglingQueue) {
  TempDir dir;
  const std::string path = dir.File("s.vhd");
  const std::string crashed = dir.File("crashed.vhd");
  ASSERT_OK(CreateImage("vhd", path, 64 << 20, "subformat=dynamic"));
  const std::string spec = "dedup:format=on+vhd+file:";
  Rng rng(2);
  AlignedBuffer data = RandomBuffer(rng, 64 * 4096);
  {
    auto dev = Open(spec + path);
    ASSERT_OK(dev);
    {
      SyncIo io(**dev);
      ASSERT_OK(io.Write(0, data.span()));
      ASSERT_OK(io.Flush());
      // What a SIGKILL leaves: the file as it is now, before any close.
      std::filesystem::copy_file(path, crashed);
    }
  }
  const uint64_t size_before = std::filesystem::file_size(crashed);
  {
    OpenOptions open;
    open.for_check = true;
    auto dev = Open("dedup+vhd+file:" + crashed, open);
    ASSERT_OK(dev);
    uint64_t vhd_repaired = 0;
    for (BlockDevice* d = dev->get(); d != nullptr; d = d->lower()) {
      CheckResult r;
      ASSERT_OK(d->Check(CheckMode::kRepairLeaks, &r)) << d->kind();
      EXPECT_EQ(r.corruptions, 0u) << d->kind();
      if (d->kind() == "vhd") vhd_repaired = r.repaired;
    }
    EXPECT_GT(vhd_repaired, 0u) << "the crash left no reservation: the repair path is not tested";
    ASSERT_OK((*dev)->Close());
  }
  EXPECT_LE(std::filesystem::file_size(crashed), size_before);
  auto dev = Open("dedup+vhd+file:" + crashed, OpenOptions{.read_only = true});
  ASSERT_OK(dev);
  std::vector<unsigned char> got = ReadAll(**dev);
  got.resize(data.size());
  EXPECT_EQ(std::memcmp(got.data(), data.data(), data.size()), 0) << "flushed data lost";
  EXPECT_EQ(CheckStack(**dev).corruptions, 0u);
}

// The contract that makes it safe: a repair that rebuilds a layer's state refuses while any
// queue of that layer is open.
TEST(CheckRepair, VhdRepairRefusesWhileAQueueIsOpen) {
  TempDir dir;
  const std::string path = dir.File("d.vhd");
  ASSERT_OK(CreateImage("vhd", path, 8 << 20, "subformat=dynamic"));
  auto dev = Open("vhd+file:" + path);
  ASSERT_OK(dev);
  auto queue = (*dev)->OpenQueue();
  ASSERT_OK(queue);
  CheckResult r;
  Status s = (*dev)->Check(CheckMode::kRepairLeaks, &r);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, make_error_code(Errc::kBusy)) << s.error().message;
  queue->reset();
  EXPECT_OK((*dev)->Check(CheckMode::kRepairLeaks, &r));
}

// Issue 11 item 4: a forged superblock or transaction header must not make replay allocate
// what it claims.
class ForgedJournal : public ::testing::Test {
 protected:
  static Superblock Planned() {
    return MetaStore::Plan("VSTEST01", {TableDesc{0, 1000, 4}}, 16 * kMetaPageSize, {});
  }
};

TEST_F(ForgedJournal, AJournalLargerThanTheFormatAllowsIsRefusedByName) {
  DevicePtr big = MakeDevice<MemoryDevice>(uint64_t{4} << 30, 512);
  auto store = MetaStore::Format(*big, Planned(), "t");
  ASSERT_OK(store);
  Superblock sb = (*store)->superblock();
  store->reset();
  // A 1 GiB journal on a 4 GiB device (the table and data moved after it): layout-valid.
  sb.journal_bytes = uint64_t{1} << 30;
  sb.tables[0].offset = sb.journal_offset + sb.journal_bytes;
  sb.data_offset = sb.tables[0].offset + (1 << 20);
  ++sb.generation;
  SyncIo io(*big);
  ASSERT_OK(WriteSuperblock(io, sb, "t"));
  auto read = ReadSuperblock(io, "VSTEST01", "t");
  ASSERT_OK(read);
  auto attached = MetaStore::Attach(*big, *read, true, "t");
  ASSERT_FALSE(attached);
  EXPECT_EQ(attached.error().code, make_error_code(Errc::kCorruption));
  EXPECT_NE(attached.error().message.find("journal size 1073741824 is outside"), std::string::npos)
      << attached.error().message;
}

TEST_F(ForgedJournal, ATransactionHeaderClaimingTheWholeJournalEndsReplayCleanly) {
  DevicePtr dev = MakeDevice<MemoryDevice>(8 << 20, 512);
  auto store = MetaStore::Format(*dev, Planned(), "t");
  ASSERT_OK(store);
  const Superblock sb = (*store)->superblock();
  {
    uint32_t v = 7;
    (*store)->Set(0, 3, &v);
    MetaBatch b = (*store)->TakePending();
    auto lock = (*store)->LockCommits();
    ASSERT_OK((*store)->Commit(&b));
  }
  store->reset();  // a crash: the journal holds transaction 1
  SyncIo io(*dev);
  // Transaction 2, forged: its header claims every block left in the journal and a payload that
  // does not match; then another claiming 4 GiB.
  AlignedBuffer block(kMetaPageSize);
  auto* b = reinterpret_cast<uint8_t*>(block.data());
  using Claim = std::pair<uint32_t, uint32_t>;  // blocks, payload bytes
  for (const auto& [blocks, payload] : {Claim{15, 100}, Claim{0xFFFFFFFF, 0xFFFFFFF0}}) {
    std::memset(b, 0, kMetaPageSize);
    StoreLE32(b, 0x314A5356);  // "VSJ1"
    StoreLE64(b + 8, sb.checkpoint_seq + 1);
    StoreLE64(b + 16, sb.volume_id);
    StoreLE32(b + 24, blocks);
    StoreLE32(b + 28, payload);
    ASSERT_OK(io.Write(sb.journal_offset + kMetaPageSize, block.span()));
    auto attached = MetaStore::Attach(*dev, sb, true, "t");
    ASSERT_OK(attached);
    std::map<uint64_t, uint32_t> got;
    ASSERT_OK((*attached)->Load([&](uint32_t, uint64_t i, const uint8_t* e) -> Status {
      got[i] = LoadLE32(e);
      return OkStatus();
    }));
    EXPECT_EQ(got, (std::map<uint64_t, uint32_t>{{3, 7}})) << "a torn tail ends the journal";
    EXPECT_EQ((*attached)->counters().replayed_transactions, 1u);
  }
}

// Issue 11 item 13: a physical grain has at most one reference per virtual grain, so capping
// the virtual grains below 2^32 - 1 keeps the 32-bit count from overflowing. The edge: the
// largest size opens, one grain more is refused by name.
TEST(DedupRefcounts, VirtualGrainsStopBelowTheCountersLimit) {
  const uint64_t max = DedupDevice::kMaxVirtualGrains;
  auto too_big = Open("dedup:size=" + std::to_string((max + 1) * 4096) + "+null:18G");
  ASSERT_FALSE(too_big);
  EXPECT_NE(too_big.error().message.find("32-bit reference count"), std::string::npos)
      << too_big.error().message;
  auto edge = Open("dedup:size=" + std::to_string(max * 4096) + "+null:18G");
  ASSERT_OK(edge);
  EXPECT_EQ((*edge)->geometry().size_bytes, max * 4096);
  // 64 KiB grains allow 16 times more.
  EXPECT_OK(Open("dedup:grain=64K,size=" + std::to_string(max * 65536) + "+null:18G"));
}

// Issue 11 item 12: dedup discards the grains it frees once the commit that frees them is
// durable. Below it, a zstd whose virtual size (24 MiB) is above what its bins can hold (about
// 14 MiB raw): dedup's next-fit allocator walks all its physical grains as it overwrites a
// small region with incompressible data, so without the discards zstd fills up within 15
// rounds.
TEST(DedupDiscard, FreedGrainsGoBackToAThinDeviceBelow) {
  auto dev = Open("dedup:size=1M+zstd:size=24M+memory:16M");
  ASSERT_OK(dev);
  SyncIo io(**dev);
  Rng rng(5);
  AlignedBuffer data(1 << 20);
  for (int round = 0; round < 40; ++round) {
    data = RandomBuffer(rng, 1 << 20);
    ASSERT_OK(io.Write(0, data.span())) << "round " << round;
    ASSERT_OK(io.Flush()) << "round " << round;
  }
  AlignedBuffer back(1 << 20);
  ASSERT_OK(io.Read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
  // What zstd holds is what dedup has live, plus at most a round in flight.
  auto below = (*dev)->lower()->Space();
  ASSERT_TRUE(below.has_value());
  EXPECT_LE(below->physical_bytes_used, uint64_t{4} << 20);
}

// A commit's waits for durability below are counted (durable_wait_us): over a device whose
// flush takes 20 ms, one guest flush (a commit: a flush, then the journal's FUA write) waits
// that long; before any commit, nothing. What vstack bench sets against the run's time. The
// delay layer holds the mean latency at its target by delivering a completion early by the
// wake-up lateness it has learned (format's flushes teach it): one flush may end tens of
// microseconds before 20 ms, and that earliness is counted below (early_ns, a sum over every
// delivery, so at least this flush's).
TEST(DedupCommit, CountsTheTimeItsCommitsWaitForFlushesBelow) {
  auto dev = Open("dedup:size=16M+delay:latency=0us,flush=20ms+memory:32M");
  ASSERT_OK(dev);
  {
    SyncIo io(**dev);
    Rng rng(3);
    AlignedBuffer data = RandomBuffer(rng, 1 << 20);
    ASSERT_OK(io.Write(0, data.span()));
    EXPECT_EQ((*dev)->Stats().counter("durable_wait_us"), 0u);
    ASSERT_OK(io.Flush());
    const uint64_t waited_ns = (*dev)->Stats().counter("durable_wait_us") * 1000;
    const uint64_t early_ns = (*dev)->lower()->Stats().counter("early_ns");
    EXPECT_GE(waited_ns + early_ns + 1000, 20'000'000u)  // + 1000: the counter is whole us
        << "waited " << waited_ns << " ns, delivered " << early_ns << " ns early below";
    EXPECT_LE(early_ns, 2'000'000u) << "the bound above would say little";
    EXPECT_GE((*dev)->Stats().counter("commits"), 1u);
  }
  ASSERT_OK((*dev)->Close());
}

// Freed grains are reused before anything is discarded: random overwrites of a region keep
// dedup's footprint below at the region (plus a few MiB left for reuse), and cost next to no
// discards, while every grain that stays free is discarded at the latest when the device
// closes. (Counted, not timed: it was one discard per freed grain, about one per overwrite.)
TEST(DedupDiscard, OverwritesReuseFreedGrainsInsteadOfDiscardingThem) {
  auto dev = Open("dedup+zstd:size=64M+memory:64M");
  ASSERT_OK(dev);
  constexpr uint64_t kRegion = 8 << 20;
  {
    SyncIo io(**dev);
    Rng rng(13);
    AlignedBuffer first = RandomBuffer(rng, kRegion);
    ASSERT_OK(io.Write(0, first.span()));
    ASSERT_OK(io.Flush());
    for (int i = 0; i < 8192; ++i) {  // 32 MiB of 4 KiB random overwrites, a flush every 64
      AlignedBuffer b = RandomBuffer(rng, 4096);
      ASSERT_OK(io.Write(rng.Below(kRegion / 4096) * 4096, b.span()));
      if (i % 64 == 63) {
        ASSERT_OK(io.Flush());
      }
    }
    const LayerStats st = (*dev)->Stats();
    EXPECT_EQ(st.counter("unique_writes"), kRegion / 4096 + 8192);
    EXPECT_LE(st.counter("discards"), 64u) << "freed grains are discarded instead of reused";
    // What zstd holds: the region, plus what stays free for reuse (4 MiB at most, then
    // discarded) and a commit interval's grains in flight.
    const auto below = (*dev)->lower()->Space();
    ASSERT_TRUE(below.has_value());
    EXPECT_LE(below->physical_bytes_used, kRegion + (6 << 20));
    // Discard the region: its grains stay free, so they go back below at the latest at close.
    ASSERT_OK(io.Discard(0, kRegion));
    ASSERT_OK(io.Flush());
  }
  ASSERT_OK((*dev)->Close());
  EXPECT_GE((*dev)->Stats().counter("discarded_bytes"), kRegion);
}

// A layer that runs out of its own units commits (which frees what was released) and retries,
// but does not discard every free unit below as it does when the device below is full: that
// was thousands of one-unit discards per commit (ENOSPC and the layer's own Errc::kNoSpace
// compare equal). Counted, not timed.
TEST(DedupDiscard, OwnUnitsRunningOutCommitsWithoutDiscardingEveryFreeUnit) {
  // 2,560 units; the writes keep all but two of them live, fewer free than the 8 records a
  // due commit waits for at the least (GrainDevice::commit_due: with more units free, a commit
  // comes before the layer runs out).
  constexpr uint64_t kLive = 2558;
  for (const char* spec : {"zstd:size=11M+memory:12M", "dedup:size=11M+memory:12M"}) {
    SCOPED_TRACE(spec);
    auto dev = Open(spec);
    ASSERT_OK(dev);
    SyncIo io(**dev);
    Rng rng(17);
    for (uint64_t i = 0; i < kLive; ++i) {  // every grain of the region live
      AlignedBuffer b = RandomBuffer(rng, 4096);
      ASSERT_OK(io.Write(i * 4096, b.span())) << "fill " << i;
    }
    for (int i = 0; i < 6144; ++i) {  // 24 MiB of incompressible 4 KiB overwrites, no flush
      AlignedBuffer b = RandomBuffer(rng, 4096);
      ASSERT_OK(io.Write(rng.Below(kLive) * 4096, b.span())) << "write " << i;
    }
    const LayerStats st = (*dev)->Stats();
    EXPECT_GT(st.counter("retries"), 0u) << "the layer never ran out of units: tests nothing";
    EXPECT_LE(st.counter("discards"), 64u) << "free units are discarded at every commit";
  }
}

// Units one queue released are freed by a commit only once no other queue may still be
// reading them (UnitMap's read generations), so a commit made while another thread is in the
// middle of a write frees them at a later commit. A layer out of units therefore commits again
// (backing off) while it holds units nothing references, and a guest never gets ENOSPC from a
// layer that is half garbage: with a single retry after a single commit, three writers over
// half the units failed within a few thousand writes, every run (`vstack bench --stack
// dedup+memory:64M --size 16M --threads 2` failed so, and zstd alike). Counted, not timed.
TEST(DedupDiscard, ThreeWritersOverHalfTheUnitsNeverRunOut) {
  for (const char* spec : {"dedup:size=16M+memory:18M", "zstd:size=16M+memory:18M"}) {
    SCOPED_TRACE(spec);
    auto dev = Open(spec);
    ASSERT_OK(dev);
    const uint64_t units = 4096;  // about 16 MiB of 4 KiB units, half of them live
    std::atomic<bool> failed{false};
    std::string first_error;
    std::mutex mu;
    auto writer = [&](uint64_t seed) {
      SyncIo io(**dev);
      Rng rng(seed);
      for (uint64_t i = 0; i < 2 * units && !failed; ++i) {  // each writer cycles the units 2x
        AlignedBuffer b = RandomBuffer(rng, 8192);
        if (std::error_code ec = io.Write(rng.Below(units / 2 / 2) * 8192, b.span())) {
          std::lock_guard lock(mu);
          if (!failed.exchange(true)) {
            first_error = "write " + std::to_string(i) + ": " + ec.message();
          }
        }
      }
    };
    // More writers than CI's 2 cores: one is always off a core, now and then in the middle of
    // a write while another commits.
    std::vector<std::thread> writers;
    for (uint64_t seed = 1; seed <= 3; ++seed) writers.emplace_back(writer, seed);
    for (std::thread& t : writers) t.join();
    EXPECT_FALSE(failed) << first_error;
    EXPECT_GT((*dev)->Stats().counter("retries"), 0u) << "the layer never ran out of units";
    ASSERT_OK((*dev)->Close());
  }
}

// dedup over zstd, incompressible data: every dedup grain a write touches is live data to zstd
// until dedup discards it, and dedup can reuse or discard a released grain only after a commit.
// Committed only once a quarter of the journal's records piled up (16,384 here), dedup let
// about 11,000 released grains wait in a 64 MiB stack with 16 MiB live, zstd filled up with
// them, and dedup's commit could not write its journal into the full zstd: ENOSPC (all four
// writers, every run). A due commit once a quarter of the grains' records is pending bounds
// that garbage.
TEST(DedupDiscard, OverZstdTheGarbageWaitingForACommitStaysBounded) {
  auto dev = Open("dedup+zstd+memory:64M");
  ASSERT_OK(dev);
  const uint64_t blocks = (16 << 20) / 8192;
  std::atomic<int> failures{0};
  auto writer = [&](uint64_t seed) {
    SyncIo io(**dev);
    Rng rng(seed);
    for (uint64_t i = 0; i < 8 * blocks && failures == 0; ++i) {  // 128 MiB of 8 KiB overwrites
      AlignedBuffer b = RandomBuffer(rng, 8192);
      if (io.Write(rng.Below(blocks) * 8192, b.span())) ++failures;
    }
  };
  std::vector<std::thread> writers;  // 4 x 128 MiB over the same 16 MiB
  for (uint64_t seed = 1; seed <= 4; ++seed) writers.emplace_back(writer, seed);
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(failures, 0);
  ASSERT_OK((*dev)->Close());
}

// The same stack with 40 of its 64 MiB live: garbage waiting for a commit (about a third of
// dedup's units at four writers, whose per-queue share of the due rule stays fixed) plus the
// live grains filled zstd below, and dedup's writes ran out of tries (ENOSPC; `vstack bench
// --stack dedup+zstd+memory:64M --size 40M --threads 4`, 3 runs of 4). A commit is also due
// once the queues' pending records would outnumber the free units, so the garbage shrinks as
// the room does.
TEST(DedupDiscard, OverZstdSixtyPercentLiveNeverRunsOut) {
  for (int run = 0; run < 3; ++run) {  // the failure came in 3 runs of 4: three chances here
    SCOPED_TRACE("run " + std::to_string(run));
    auto dev = Open("dedup+zstd+memory:64M");
    ASSERT_OK(dev);
    bench::WorkloadKnobs k;  // vstack bench's workload: 8 KiB, 4 threads x QD8, random bytes
    k.block_size = 8192;
    k.threads = 4;
    k.queue_depth = 8;
    k.warmup_s = 0;
    k.target_size = 40 << 20;
    k.seed = 1 + run;
    k.pattern = bench::AccessPattern::kSequential;  // the fill: every block live once
    k.write_pct = 100;
    k.io_count = k.target_size / k.block_size;
    auto fill = bench::RunWorkload(**dev, k);
    ASSERT_OK(fill);
    ASSERT_TRUE(fill->error.empty()) << fill->error;
    k.pattern = bench::AccessPattern::kRandom;  // then half reads (they hold read generations),
    k.write_pct = 50;                           // half random overwrites: 4 x 40 MiB of them
    k.io_count = 40 * k.io_count;
    auto r = bench::RunWorkload(**dev, k);
    ASSERT_OK(r);
    EXPECT_TRUE(r->error.empty()) << r->error;
    ASSERT_OK((*dev)->Close());
  }
}

// Issue 11 item 11: metadata areas were holes after formatting, so on a full filesystem even a
// flush after overwrites failed, and crc32c failed every write into a clean region. Format now
// reserves them (fallocate).
TEST(FullFilesystem, ReservedMetadataKeepsFlushedDataAndFlushesWorking) {
  TempDir dir;
  SmallFilesystem fs(dir.File("fs"), "6m");
  if (!fs.mounted()) GTEST_SKIP() << "mounting a tmpfs is not permitted here (CI runs as root)";
  Rng rng(9);
  for (const char* layer : {"dedup", "zstd", "crc32c"}) {
    SCOPED_TRACE(layer);
    const std::string path = dir.File("fs/" + std::string(layer) + ".img");
    const std::string spec = std::string(layer) + "+file:" + path;
    AlignedBuffer first = RandomBuffer(rng, 1 << 20);
    {
      auto dev = Open(spec + ",create=on,size=32M");  // 32 MiB sparse on 6 MiB
      ASSERT_OK(dev);
      SyncIo io(**dev);
      ASSERT_OK(io.Write(0, first.span()));
      ASSERT_OK(io.Flush());
      // Fill the filesystem: a write fails with a clear ENOSPC, nothing else.
      std::error_code full;
      for (uint64_t off = 1 << 20; off + (1 << 20) <= (*dev)->geometry().size_bytes && !full;
           off += 1 << 20) {
        AlignedBuffer more = RandomBuffer(rng, 1 << 20);
        full = io.Write(off, more.span());
      }
      ASSERT_TRUE(full) << "the filesystem never filled up";
      EXPECT_TRUE(full == std::error_code(ENOSPC, std::system_category()) ||
                  full == make_error_code(Errc::kNoSpace))
          << full.message();
      // What was written before stays readable, and a flush (journal, tables) still works.
      EXPECT_OK(io.Flush());
      if (std::string(layer) == "crc32c") {
        // Overwrites in place need no new space: they work on a full filesystem.
        ASSERT_OK(io.Write(0, first.span()));
        EXPECT_OK(io.Flush());
      }
      AlignedBuffer back(1 << 20);
      ASSERT_OK(io.Read(0, back.span()));
      EXPECT_EQ(std::memcmp(back.data(), first.data(), first.size()), 0);
    }
    {
      auto dev = Open(spec, OpenOptions{.read_only = true});
      ASSERT_OK(dev);
      SyncIo io(**dev);
      AlignedBuffer back(1 << 20);
      ASSERT_OK(io.Read(0, back.span()));
      EXPECT_EQ(std::memcmp(back.data(), first.data(), first.size()), 0) << "flushed data lost";
    }
    std::filesystem::remove(path);
  }
}

// A stack whose open fails over a file that its create=on made removes the file: a full
// filesystem (`dedup+file:y.img,create=on,size=64M` failed to reserve its metadata) left a
// blank 64 MiB y.img that every later open refused as "not created by this command". A file
// that existed before is never removed.
TEST(FailedOpen, AFileThatTheOpenCreatedIsRemovedOnFailure) {
  TempDir dir;
  const std::string made = dir.File("made.img");
  // A layer that refuses its options after the backend made the file (no full disk needed).
  auto bad = Open("dedup:grain=3K+file:" + made + ",create=on,size=64M");
  ASSERT_FALSE(bad);
  EXPECT_FALSE(std::filesystem::exists(made)) << "the failed open left " << made;
  CommandResult cli = RunVstack("info 'zstd:level=99+file:" + made + ",create=on,size=64M'");
  EXPECT_EQ(cli.status, 2) << cli.output;
  EXPECT_FALSE(std::filesystem::exists(made)) << cli.output;
  // A file that existed (with data, or empty) stays, whatever create=on says.
  const std::string old = dir.File("old.img");
  const std::vector<unsigned char> before = WriteZeroHeadedDisk(old);
  const std::string empty = dir.File("empty.img");
  std::ofstream(empty).close();
  for (const std::string& path : {old, empty}) {
    auto refused = Open("dedup:grain=3K+file:" + path + ",create=on,size=64M");
    ASSERT_FALSE(refused);
    EXPECT_TRUE(std::filesystem::exists(path)) << "removed a file that existed: " << path;
  }
  ASSERT_FALSE(Open("dedup+file:" + old + ",create=on,size=64M"));  // not formatted unasked
  EXPECT_TRUE(FileBytes(old) == before);
  // On success the file stays, of course.
  ASSERT_OK(Open("dedup+file:" + made + ",create=on,size=64M"));
  EXPECT_TRUE(std::filesystem::exists(made));
}

// A stack whose open fails over a file that existed and that its size= made larger gives the
// file its size back: an empty file was left at the size= bytes (formatted, if a layer below
// the one that failed formats a fresh device), and a later open took it for a disk.
TEST(FailedOpen, AFileThatTheOpenGrewGetsItsSizeBack) {
  TempDir dir;
  const std::string empty = dir.File("empty.img");
  std::ofstream(empty).close();
  for (const std::string layers :
       {"dedup:grain=3K", "zstd:level=99+dedup", "vhd:recover=maybe+crc32c"}) {
    SCOPED_TRACE(layers);
    auto refused = Open(layers + "+file:" + empty + ",size=64M");
    ASSERT_FALSE(refused);
    EXPECT_EQ(std::filesystem::file_size(empty), 0u) << refused.error().message;
  }
  CommandResult cli = RunVstack("info 'zstd:level=99+dedup+file:" + empty + ",create=on,size=64M'");
  EXPECT_EQ(cli.status, 2) << cli.output;
  EXPECT_EQ(std::filesystem::file_size(empty), 0u) << cli.output;
  // A file with contents grows at the first write: format=on (asked for) wrote past its end
  // below the layer that failed, and the part written there goes again.
  const std::string old = dir.File("old.img");
  WriteZeroHeadedDisk(old);
  const uint64_t old_size = std::filesystem::file_size(old);
  ASSERT_FALSE(Open("zstd:level=99+dedup:format=on+file:" + old + ",size=64M"));
  EXPECT_EQ(std::filesystem::file_size(old), old_size);
  // On success the file keeps its new size, of course.
  ASSERT_OK(Open("dedup+file:" + empty + ",size=64M"));
  EXPECT_EQ(std::filesystem::file_size(empty), 64u << 20);
}

TEST(FailedOpen, AFullFilesystemLeavesNoBlankFileBehind) {
  TempDir dir;
  SmallFilesystem fs(dir.File("fs"), "1m");
  if (!fs.mounted()) GTEST_SKIP() << "mounting a tmpfs is not permitted here (CI runs as root)";
  const std::string path = dir.File("fs/y.img");
  for (const char* layer : {"dedup", "zstd"}) {  // (crc32c's 64 MiB need less than 1 MiB)
    SCOPED_TRACE(layer);
    auto dev = Open(std::string(layer) + "+file:" + path + ",create=on,size=64M");
    ASSERT_FALSE(dev) << "a 1 MiB filesystem held a 1 MiB journal and the tables";
    EXPECT_NE(dev.error().message.find("No space left on device"), std::string::npos)
        << dev.error().message;
    EXPECT_FALSE(std::filesystem::exists(path)) << "the failed open left " << path;
  }
  // The same stack over a file that existed: refused, and the file stays.
  std::ofstream(path).close();
  auto dev = Open("dedup:format=on+file:" + path + ",size=64M");
  ASSERT_FALSE(dev);
  EXPECT_TRUE(std::filesystem::exists(path));
  // Over a sparse file that already had its size, a failed format kept what it had reserved (on
  // ext4, 51 GB for a 16 TiB file below: the filesystem full after the error). It gives it back.
  // tmpfs undoes a failed fallocate itself, so here the message says the give-back ran.
  std::filesystem::resize_file(path, 64 << 20);
  auto sparse = Open("dedup:format=on+file:" + path);
  ASSERT_FALSE(sparse);
  EXPECT_NE(sparse.error().message.find("what it had reserved is given back"), std::string::npos)
      << sparse.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_LE(uint64_t(st.st_blocks) * 512, uint64_t{64} << 10) << "bytes still allocated";
}

// Issue 11 item 12, a thin device below smaller than the deduplicated region: dedup presents
// 32 MiB over a sparse 24 MiB file on a 6 MiB tmpfs. Every round writes the whole 32 MiB as 16
// copies of 2 MiB of new random data, without a flush, so dedup holds 2 MiB live and, while a
// round overwrites the one before, 4 MiB plus the grains released since its last commit. Over
// 6 rounds it stores 12 MiB of distinct data. The filesystem fills up between commits: then
// dedup must commit (its journal is reserved, so that works on a full filesystem), discard
// what it freed (punching holes in the file) and write the grain again.
TEST(DedupDiscard, OverAThinDeviceSmallerThanTheDeduplicatedRegion) {
  TempDir dir;
  SmallFilesystem fs(dir.File("fs"), "6m");
  if (!fs.mounted()) GTEST_SKIP() << "mounting a tmpfs is not permitted here (CI runs as root)";
  auto dev = Open("dedup:size=32M+file:" + dir.File("fs/d.img") + ",create=on,size=24M");
  ASSERT_OK(dev);
  {
    SyncIo io(**dev);
    Rng rng(12);
    AlignedBuffer block(2 << 20);
    for (int round = 0; round < 6; ++round) {
      block = RandomBuffer(rng, 2 << 20);
      for (uint64_t off = 0; off < (32 << 20); off += 2 << 20) {
        ASSERT_OK(io.Write(off, block.span())) << "round " << round << ", offset " << off;
      }
    }
    ASSERT_OK(io.Flush());
    AlignedBuffer back(2 << 20);
    for (uint64_t off = 0; off < (32 << 20); off += 2 << 20) {
      ASSERT_OK(io.Read(off, back.span()));
      ASSERT_EQ(std::memcmp(back.data(), block.data(), block.size()), 0) << "offset " << off;
    }
  }
  const LayerStats st = (*dev)->Stats();
  EXPECT_GT(st.counter("retries"), 0u) << "the filesystem never filled up: the test tests nothing";
  EXPECT_GE(st.counter("discarded_bytes"), uint64_t{2} << 20);
  ASSERT_OK((*dev)->Close());
}

}  // namespace
}  // namespace vstack::testing
