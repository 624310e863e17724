// Crash consistency of VHDX (docs/layers/vhdx.md, "Write order"). A workload of batches of
// writes (new blocks, partial blocks, whole blocks, writes across blocks) and flushes runs on
// a file through a RecordingDevice that completes requests late and out of order. Then, for
// every prefix of the recorded lower I/O, and for sampled subsets and reorderings of the
// writes not yet durable at that point, the image a power loss could leave is opened writable
// (replaying its log), checked, and read: it must open, show no corruption, and hold every
// write flushed before the crash (or a later write to the same sector). The allocations of a
// batch are group-committed: one log entry carries all of their BAT entries. The log is 1 MiB and
// the workload wraps it, so the flush before reuse is exercised too.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

#include "formats/vhdx/vhdx_compact.h"
#include "formats/vhdx/vhdx_device.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/formats/vhd_test_util.h"
#include "tests/formats/vhdx_test_util.h"
#include "tests/testing/fault_device.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/recording_device.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

constexpr uint64_t kDiskSize = 8 << 20;  // 8 blocks of 1 MiB
constexpr uint64_t kSector = 512;
constexpr uint64_t kB = 1 << 20;

struct GuestWrite {
  uint64_t offset, length;
  unsigned char fill;
};

void WriteSparse(const std::string& path, const std::vector<unsigned char>& img) {
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(img.size())), 0);
  for (size_t at = 0; at < img.size(); at += 4096) {
    const size_t n = std::min<size_t>(4096, img.size() - at);
    if (IsZero(&img[at], n)) continue;
    ASSERT_EQ(::pwrite(fd, &img[at], n, static_cast<off_t>(at)), static_cast<ssize_t>(n));
  }
  ::close(fd);
}

// The number of events (submissions and completions) in `log`: crash points are 0..events.
uint64_t Events(const std::vector<RecordedOp>& log) {
  uint64_t events = 0;
  for (const RecordedOp& op : log) {
    events = std::max(events, op.submitted + 1);
    if (op.completed != UINT64_MAX) events = std::max(events, op.completed + 1);
  }
  return events;
}

// Crash images go to tmpfs when there is one: every replay flushes, and fsync on a busy disk
// would dominate the test's time. A file (not memory) keeps the image's length exact, so a
// BAT entry that reaches the disk before its log entry shows up as a block past the end.
std::string CrashImagePath(TempDir& dir, const std::string& name) {
  if (::access("/dev/shm", W_OK) != 0) return dir.File(name + ".vhdx");
  return "/dev/shm/vstack-vhdx-" + name + "-" + std::to_string(::getpid());
}

TEST(VhdxCrash, EveryPrefixAndSampledReorderingsReplayCheckAndKeepFlushedData) {
  TempDir dir;
  const std::string path = dir.File("crash.vhdx");
  ASSERT_OK(CreateImage("vhdx", path, kDiskSize, "block_size=1M"));
  const std::vector<unsigned char> base = ReadAll(path);

  std::vector<std::vector<GuestWrite>> batches;
  std::set<size_t> flush_after;
  unsigned char fill = 1;
  auto add = [&](std::vector<std::pair<uint64_t, uint64_t>> writes) {
    std::vector<GuestWrite> batch;
    for (auto [off, len] : writes) batch.push_back({off, len, fill++});
    batches.push_back(batch);
  };
  // Three new blocks, group-committed in one log entry; block 3 twice, once up to its end.
  add({{0, 4096}, {kB + 8192, 4096}, {3 * kB, 16384}, {4 * kB - 4096, 4096}});
  add({{4096, 4096}, {kB + 8192, 4096}});                // allocated blocks
  flush_after.insert(1);
  add({{2 * kB, kB}, {5 * kB - 4096, 8192}});  // a whole block; a write across blocks
  add({{512, 1024}, {7 * kB + 65536, 65536}, {6 * kB, 4096}});
  flush_after.insert(3);
  add({{3 * kB + 16384, 4096}, {0, 8192}});
  add({{kB, kB}});

  std::vector<unsigned char> model(kDiskSize / kSector, 0);
  std::vector<std::pair<uint64_t, std::vector<unsigned char>>> flushes;
  std::vector<RecordedOp> log;
  {
    auto file = Open("file:" + path);
    ASSERT_OK(file);
    auto* rec = new RecordingDevice(std::move(*file), /*defer_completions=*/true);
    auto dev = vhdx::VhdxDevice::Open(DevicePtr(rec));
    ASSERT_OK(dev);
    auto q = (*dev)->OpenQueue();
    ASSERT_OK(q);
    for (size_t b = 0; b < batches.size(); ++b) {
      const auto& batch = batches[b];
      std::vector<AlignedBuffer> bufs;
      std::vector<iovec> iov(batch.size());
      std::vector<IoRequest> reqs(batch.size());
      for (size_t i = 0; i < batch.size(); ++i) {
        bufs.emplace_back(batch[i].length, 4096);
        std::memset(bufs.back().data(), batch[i].fill, batch[i].length);
        iov[i] = bufs.back().iov();
        reqs[i].op = Op::kWrite;
        reqs[i].offset = batch[i].offset;
        reqs[i].length = batch[i].length;
        reqs[i].iov = &iov[i];
        reqs[i].iovcnt = 1;
        for (uint64_t s = 0; s < batch[i].length / kSector; ++s) {
          model[batch[i].offset / kSector + s] = batch[i].fill;
        }
      }
      RunBatch(**q, reqs);
      for (auto& r : reqs) ASSERT_OK(r.status);
      if (flush_after.count(b)) {
        const size_t before = rec->Log().size();
        IoRequest f;
        f.op = Op::kFlush;
        ASSERT_OK(Execute(**q, f));
        const auto after = rec->Log();
        ASSERT_EQ(after.size(), before + 1) << "a guest flush is one lower flush";
        flushes.emplace_back(after[before].completed, model);
      }
    }
    (*q)->WaitIdle();
    q->reset();
    ASSERT_OK((*dev)->Close());
    log = rec->Log();
  }
  const auto fua = std::count_if(log.begin(), log.end(), [](auto& o) { return o.flags & kIoFua; });
  EXPECT_EQ(fua, 3) << "one FUA log entry per batch that allocates (group commit of 3, 3, 2)";
  const auto lower_flushes =
      std::count_if(log.begin(), log.end(), [](auto& o) { return o.op == Op::kFlush; });
  EXPECT_EQ(lower_flushes, 2 + 2 + 3) << "header updates at first write and close, the guest's";

  const uint64_t events = Events(log);
  const std::string image_path = CrashImagePath(dir, "crash");
  Rng rng(42);
  int images = 0;
  for (uint64_t crash = 0; crash <= events; ++crash) {
    std::vector<unsigned char> durable(kDiskSize / kSector, 0);
    for (const auto& [completed, state] : flushes) {
      if (completed < crash) durable = state;
    }
    for (int sample = 0; sample < 4; ++sample) {
      const std::vector<unsigned char> img =
          CrashImage(base, log, crash, sample == 0 ? nullptr : &rng);
      ++images;
      WriteSparse(image_path, img);
      auto dev = Open("vhdx+file:" + image_path);
      ASSERT_OK(dev) << "crash at event " << crash << " sample " << sample;
      CheckResult check;
      ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &check));
      ASSERT_EQ(check.corruptions, 0u) << "crash at event " << crash << ": "
                                       << (check.messages.empty() ? "" : check.messages.front());
      const auto data = ReadBytes(**dev, 0, kDiskSize);
      for (uint64_t s = 0; s < kDiskSize / kSector; ++s) {
        const unsigned char got = data[s * kSector];
        ASSERT_TRUE(std::all_of(&data[s * kSector], &data[s * kSector] + kSector,
                                [&](unsigned char c) { return c == got; }))
            << "torn sector " << s << " at crash " << crash;
        if (got == durable[s]) continue;
        bool later = false;
        for (const auto& batch : batches) {
          for (const GuestWrite& g : batch) {
            if (g.fill == got && g.offset / kSector <= s && s < (g.offset + g.length) / kSector &&
                got > durable[s]) {
              later = true;
            }
          }
        }
        ASSERT_TRUE(later) << "flushed sector " << s << " lost: holds " << int(got) << ", flushed "
                           << int(durable[s]) << " (crash at event " << crash << ", sample "
                           << sample << ")";
      }
      ASSERT_OK((*dev)->Close());
    }
  }
  ::unlink(image_path.c_str());
  EXPECT_GT(images, 200);
}

// Two power cuts, the second after a replay (vstack sim --stack vhdx --seed
// 13939543633023801323). An allocation's log entry is written with FUA, its data and the
// zeros that reach its block's end are not: after the first cut only the entry's
// LastFileOffset says how long the file is. The replay grows the file, writes the BAT page in
// place, flushes and marks the log empty. Growing alone does not make a length durable
// (docs/design.md): unless a write reaches the new end before that flush, the second cut
// leaves a clean log whose BAT points past the end of the file, and the image no longer opens.
TEST(VhdxCrash, ReplayMakesTheGrownLengthDurableBeforeTheLogIsMarkedEmpty) {
  TempDir dir;
  const std::string path = dir.File("grow.vhdx");
  ASSERT_OK(CreateImage("vhdx", path, kDiskSize, "block_size=1M"));
  const std::vector<unsigned char> base = ReadAll(path);
  // Opens the VHDX at `p` writable over a RecordingDevice and returns the lower I/O of `body`.
  auto recorded = [](const std::string& p, const std::function<void(vhdx::VhdxDevice&)>& body) {
    auto file = Open("file:" + p);
    EXPECT_OK(file);
    if (!file) return std::vector<RecordedOp>{};
    auto* rec = new RecordingDevice(std::move(*file));
    auto dev = vhdx::VhdxDevice::Open(DevicePtr(rec));
    EXPECT_OK(dev);
    if (!dev) return std::vector<RecordedOp>{};
    body(static_cast<vhdx::VhdxDevice&>(**dev));
    return rec->Log();
  };
  // The power cut comes after the allocation, before any flush or the close.
  const std::vector<RecordedOp> log = recorded(path, [](vhdx::VhdxDevice& dev) {
    WriteBytes(dev, kB + 4096, std::vector<unsigned char>(4096, 7));  // allocates block 1
  });
  // First cut: the headers (flushed) and the log entry (FUA) only.
  const std::vector<unsigned char> first = DurableImage(base, log, Events(log));
  ASSERT_EQ(first.size(), base.size()) << "the new block's data must not be durable yet";
  ASSERT_EQ(vhdx::EntryState(VhdxBatEntry(first, 1)), vhdx::kNotPresent);
  const std::string first_path = dir.File("first.vhdx");
  WriteSparse(first_path, first);
  const std::vector<RecordedOp> replay = recorded(first_path, [](vhdx::VhdxDevice& dev) {
    EXPECT_EQ(dev.image().replayed_entries, 1u);
    EXPECT_OK(dev.Close());
  });
  // Second cut, after the replay: what it made durable.
  const std::vector<unsigned char> second = DurableImage(first, replay, Events(replay));
  const uint64_t entry = VhdxBatEntry(second, 1);
  ASSERT_EQ(vhdx::EntryState(entry), vhdx::kFullyPresent) << "the replayed BAT page is durable";
  EXPECT_GE(second.size(), vhdx::EntryOffset(entry) + kB)
      << "block 1 ends past the file: the grown length was not durable";
  const std::string second_path = dir.File("second.vhdx");
  WriteSparse(second_path, second);
  auto dev = Open("vhdx+file:" + second_path);
  ASSERT_OK(dev);
  CheckResult check;
  ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &check));
  EXPECT_EQ(check.corruptions, 0u) << (check.messages.empty() ? "" : check.messages.front());
  EXPECT_EQ(ReadBytes(**dev, kB, kB), std::vector<unsigned char>(kB, 0))
      << "the write never landed: block 1 reads as zeros";
  ASSERT_OK((*dev)->Close());
}

// Out of space below, a replay cannot write the log's BAT page in place: over a thin layer such
// as dedup even an overwrite needs new space (`vstack sim --stack 'vhdx+crc32c+dedup' --seed
// 108` failed to reopen). The open keeps the log and loads the BAT through it: the block the log
// maps reads back and check finds nothing; the first write replays the log in place before it
// starts a new one, and fails, losing nothing, while there is still no space.
TEST(VhdxCrash, AReplayWithNoSpaceBelowLoadsTheBatThroughTheLog) {
  TempDir dir;
  const std::string path = dir.File("full.vhdx");
  ASSERT_OK(CreateImage("vhdx", path, kDiskSize, "block_size=1M"));
  const std::vector<unsigned char> sevens(4096, 7), nines(4096, 9);
  std::vector<unsigned char> crashed;
  {
    auto dev = Open("vhdx+file:" + path);
    ASSERT_OK(dev);
    WriteBytes(**dev, kB + 4096, sevens);  // allocates block 1 through the log
    ASSERT_OK(SyncIo(**dev).Flush());
    crashed = ReadAll(path);  // a power cut now: the log is active
  }
  ASSERT_EQ(vhdx::EntryState(VhdxBatEntry(crashed, 1)), vhdx::kFullyPresent);
  // ... and the BAT page written in place after the log entry did not land.
  std::fill_n(crashed.begin() + static_cast<std::ptrdiff_t>(VhdxBatEntryOffset(crashed, 1)), 8, 0);
  auto* full = new FaultDevice(MemoryWithImage(crashed));
  full->ArmNoSpace(0);
  auto dev = OpenLayersOn("vhdx", DevicePtr(full));
  ASSERT_OK(dev);
  EXPECT_EQ(ReadBytes(**dev, kB + 4096, 4096), sevens);
  const CheckResult check = CheckStack(**dev);
  EXPECT_EQ(check.corruptions, 0u) << (check.messages.empty() ? "" : check.messages.front());
  SyncIo io(**dev);
  AlignedBuffer nine_buf(4096, 4096);
  std::memcpy(nine_buf.data(), nines.data(), 4096);
  EXPECT_EQ(io.Write(kB, nine_buf.span()), std::errc::no_space_on_device);
  EXPECT_EQ(ReadBytes(**dev, kB + 4096, 4096), sevens);
  full->Disarm();  // space comes back
  ASSERT_OK(io.Write(kB, nine_buf.span()));
  ASSERT_OK(io.Flush());
  const std::vector<unsigned char> after = ReadAll(*full);
  EXPECT_EQ(vhdx::EntryState(VhdxBatEntry(after, 1)), vhdx::kFullyPresent)
      << "the first write replays the kept log in place";
  auto again = OpenLayersOn("vhdx", MemoryWithImage(after));
  ASSERT_OK(again);
  EXPECT_EQ(ReadBytes(**again, kB + 4096, 4096), sevens);
  EXPECT_EQ(ReadBytes(**again, kB, 4096), nines);
}

// Compaction (docs/layers/vhdx.md, "Compact") frees zero blocks, moves blocks into the holes
// and shrinks the file, every BAT change through the log: a crash at any point, with any
// subset of the writes not yet durable, leaves an image that opens, checks clean and reads
// exactly as before.
TEST(VhdxCrash, CompactionCrashAtAnyPointKeepsTheContents) {
  TempDir dir;
  const std::string path = dir.File("compact.vhdx");
  const uint64_t size = 12 << 20;
  ASSERT_OK(CreateImage("vhdx", path, size, "block_size=1M"));
  Rng rng(11);
  {
    auto dev = Open("vhdx+file:" + path);
    ASSERT_OK(dev);
    for (uint64_t block : {0, 1, 3, 4, 6, 8, 9, 11}) {
      std::vector<unsigned char> data(8192, 0);  // blocks 1, 4 and 8: zeros
      if (block != 1 && block != 4 && block != 8) rng.Fill(data.data(), data.size());
      WriteBytes(**dev, (block << 20) + 4096, data);
    }
    ASSERT_OK((*dev)->Close());
  }
  std::vector<unsigned char> contents;
  {
    auto dev = Open("vhdx+file:" + path);
    ASSERT_OK(dev);
    contents = ReadBytes(**dev, 0, size);
  }
  const std::vector<unsigned char> base = ReadAll(path);
  std::vector<RecordedOp> log;
  {
    auto file = Open("file:" + path);
    ASSERT_OK(file);
    auto* rec = new RecordingDevice(std::move(*file));
    DevicePtr owner(rec);
    auto report = vhdx::CompactImage(*rec, [](CompactStage, uint64_t, uint64_t) {});
    ASSERT_OK(report);
    EXPECT_EQ(report->zero_blocks_freed, 3u);
    EXPECT_GT(report->blocks_moved, 0u);
    EXPECT_LT(report->file_size_after, report->file_size_before);
    log = rec->Log();
    ASSERT_OK(owner->Close());
  }
  {
    auto dev = Open("vhdx+file:" + path);
    ASSERT_OK(dev);
    EXPECT_TRUE(ReadBytes(**dev, 0, size) == contents) << "compaction changed the contents";
  }
  const uint64_t events = Events(log);
  const bool shm = ::access("/dev/shm", W_OK) == 0;
  const std::string image_path =
      shm ? "/dev/shm/vstack-vhdx-compact-" + std::to_string(::getpid()) : dir.File("image.vhdx");
  int images = 0;
  for (uint64_t crash = 0; crash <= events; ++crash) {
    for (int sample = 0; sample < 3; ++sample) {
      WriteSparse(image_path, CrashImage(base, log, crash, sample == 0 ? nullptr : &rng));
      ++images;
      auto dev = Open("vhdx+file:" + image_path);
      ASSERT_OK(dev) << "crash at event " << crash << " sample " << sample;
      CheckResult check;
      ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &check));
      ASSERT_EQ(check.corruptions, 0u) << "crash at event " << crash << ": "
                                       << (check.messages.empty() ? "" : check.messages.front());
      ASSERT_TRUE(ReadBytes(**dev, 0, size) == contents)
          << "contents changed by a crash at event " << crash << " sample " << sample;
      ASSERT_OK((*dev)->Close());
    }
  }
  ::unlink(image_path.c_str());
  EXPECT_GT(images, 60);
}

}  // namespace
}  // namespace vstack::testing
