// Crash consistency of dynamic and differencing VHD (docs/layers/vhd.md, "Write order"). A workload
// of batches of writes (new blocks, partially written blocks, whole blocks) and flushes runs on a
// file through a RecordingDevice. Then, for every prefix of the recorded lower I/O, and for
// sampled subsets and reorderings of the writes not yet flushed at that point, the image a
// power loss could leave is opened (strictly), checked, and read: it must open, show no
// corruption (leaked space is allowed), and hold every write flushed before the crash (or a
// later write to the same sector), including, once Close() has flushed, every write. For a
// differencing disk the same workload runs in a child over a parent whose every sector holds
// kParentFill, which is the sectors' initial content: a sector never shows anything else
// (no zeros where a bitmap landed before its data).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/sync_io.h"
#include "tests/formats/vhd_test_util.h"
#include "tests/testing/recording_device.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

constexpr uint64_t kDiskSize = 4 << 20;  // 8 blocks of 512 KiB
constexpr uint64_t kSector = 512;
constexpr unsigned char kParentFill = 0xF0;  // differencing: what the parent holds everywhere

struct GuestWrite {
  uint64_t offset, length;
  unsigned char fill;  // every byte of the write (unique per write)
};

struct Workload {
  std::vector<std::vector<GuestWrite>> batches;  // each batch submitted at once
  std::set<size_t> flush_after;                  // batch indices followed by a flush
};

Workload MakeWorkload() {
  Workload w;
  unsigned char fill = 1;
  auto add = [&](std::vector<std::pair<uint64_t, uint64_t>> writes) {
    std::vector<GuestWrite> batch;
    for (auto [off, len] : writes) batch.push_back({off, len, fill++});
    w.batches.push_back(batch);
  };
  const uint64_t kB = 512 << 10;
  add({{0, 4096}, {kB + 8192, 4096}, {3 * kB, 16384}});  // three new blocks, one commit
  add({{4096, 4096}, {kB + 8192, 4096}});                // bitmap grows; same sectors
  w.flush_after.insert(1);
  add({{2 * kB, kB}, {5 * kB - 4096, 8192}});  // a whole block; a write across blocks
  add({{512, 1024},
       {7 * kB + 65536, 65536},
       {6 * kB, 4096}});  // inside an allocated block, two new
  w.flush_after.insert(3);
  add({{3 * kB + 16384, 4096}, {0, 8192}});  // more bitmap updates
  add({{kB, kB}});                           // fill a partial block
  return w;
}

// The bytes each sector may hold after a crash: the value it had at the last completed flush
// (`durable`), or any value a later write gave it.
struct Expectation {
  std::vector<unsigned char> durable;  // one fill byte per sector (0 = zeros)
  std::vector<std::set<unsigned char>> later;
};

// Writes `img` as a sparse file: only non-zero 4 KiB pages are written.
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

// The parameters: the layer's `reserve` (0 grows the file, with a FUA footer, for every
// commit; 64 MiB grows it once and allocates every later block inside the reservation,
// flush-free), and whether the image is a differencing child.
class VhdCrash : public ::testing::TestWithParam<std::tuple<uint64_t, bool>> {
 protected:
  uint64_t Reserve() const { return std::get<0>(GetParam()); }
  bool Differencing() const { return std::get<1>(GetParam()); }
};

TEST_P(VhdCrash, EveryPrefixAndSampledReorderingsOpenCheckAndKeepFlushedData) {
  TempDir dir;
  const std::string path = dir.File("crash.vhd");
  const unsigned char initial = Differencing() ? kParentFill : 0;
  if (Differencing()) {
    const std::string parent = dir.File("parent.vhd");
    ASSERT_OK(CreateImage("vhd", parent, kDiskSize, "block_size=512K"));
    auto p = OpenImage(parent);
    ASSERT_OK(p);
    WriteBytes(**p, 0, std::vector<unsigned char>(kDiskSize, kParentFill));
    ASSERT_OK((*p)->Close());
    ASSERT_OK(CreateImage("vhd", path, 0, "backing_file=parent.vhd,block_size=512K"));
  } else {
    ASSERT_OK(CreateImage("vhd", path, kDiskSize, "block_size=512K"));
  }
  const std::vector<unsigned char> base = ReadAll(path);

  // Run the workload, recording the lower I/O and, for each guest flush, the event at which
  // its lower flush completed together with the state it made durable.
  const Workload w = MakeWorkload();
  std::vector<unsigned char> model(kDiskSize / kSector, initial);
  std::vector<std::pair<uint64_t, std::vector<unsigned char>>> flushes;  // (completed, state)
  std::vector<RecordedOp> log;
  std::vector<std::vector<unsigned char>> state_after_batch;
  {
    auto file = Open("file:" + path);
    ASSERT_OK(file);
    // Completions are deferred and reordered, so the engine cannot lean on the synchronous
    // file backend finishing everything inside Submit.
    auto* rec = new RecordingDevice(std::move(*file), /*defer_completions=*/true);
    vhd::VhdOptions options;
    options.reserve = Reserve();
    if (Differencing()) options.parent_spec = "vhd+file:" + dir.File("parent.vhd");
    auto dev = vhd::VhdDevice::Open(DevicePtr(rec), options);
    ASSERT_OK(dev);
    auto q = (*dev)->OpenQueue();
    ASSERT_OK(q);
    for (size_t b = 0; b < w.batches.size(); ++b) {
      const auto& batch = w.batches[b];
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
      if (w.flush_after.count(b)) {
        const size_t before = rec->Log().size();
        IoRequest f;
        f.op = Op::kFlush;
        ASSERT_OK(Execute(**q, f));
        const auto after = rec->Log();
        ASSERT_EQ(after.size(), before + 1) << "a guest flush is one lower flush";
        ASSERT_EQ(after[before].op, Op::kFlush);
        flushes.emplace_back(after[before].completed, model);
      }
    }
    (*q)->WaitIdle();
    q->reset();
    const auto before_close = rec->Log();
    const auto lower_flushes = std::count_if(before_close.begin(), before_close.end(),
                                             [](auto& o) { return o.op == Op::kFlush; });
    const auto fua = std::count_if(before_close.begin(), before_close.end(),
                                   [](auto& o) { return o.flags & kIoFua; });
    // The guest's two flushes, plus the layer's own: one before each bitmap update of an
    // allocated block (its data first), and for differencing disks one per allocation commit
    // (data before bitmaps).
    EXPECT_EQ(lower_flushes, 2 + static_cast<int64_t>(Counter(**dev, "metadata_flushes")));
    EXPECT_EQ(fua, Reserve() == 0 ? 3 : 1) << "one FUA footer write per growth of the file";
    ASSERT_OK((*dev)->Close());
    // Close made everything durable: its last flush is a guest flush of the final state.
    log = rec->Log();
    ASSERT_GT(log.size(), before_close.size());
    ASSERT_EQ(log.back().op, Op::kFlush) << "Close ends with a flush";
    flushes.emplace_back(log.back().completed, model);
  }
  ASSERT_GT(log.size(), 30u);

  uint64_t events = 0;
  for (const RecordedOp& op : log) {
    events = std::max(events, op.submitted + 1);
    if (op.completed != UINT64_MAX) events = std::max(events, op.completed + 1);
  }
  // Every fill byte written anywhere, per sector, for the "later" sets.
  std::vector<std::set<unsigned char>> ever(kDiskSize / kSector);
  for (const auto& batch : w.batches) {
    for (const GuestWrite& g : batch) {
      for (uint64_t s = 0; s < g.length / kSector; ++s) ever[g.offset / kSector + s].insert(g.fill);
    }
  }

  const std::string image_path = dir.File("image.vhd");
  Rng rng(42);
  int images = 0, with_leaks = 0;
  for (uint64_t crash = 0; crash <= events; ++crash) {
    // The durable state: the last guest flush completed before the crash.
    std::vector<unsigned char> durable(kDiskSize / kSector, initial);
    for (const auto& [completed, state] : flushes) {
      if (completed < crash) durable = state;
    }
    for (int sample = 0; sample < 4; ++sample) {
      // Samples 1-3 also tear unflushed writes, at 512-byte (odd) or 4 KiB (even) sectors.
      const std::vector<unsigned char> img =
          CrashImage(base, log, crash, sample == 0 ? nullptr : &rng, sample % 2 ? 512 : 4096);
      ++images;
      WriteSparse(image_path, img);
      auto dev = Open("vhd+file:" + image_path, OpenOptions{.read_only = true});
      ASSERT_OK(dev) << "crash at event " << crash << " sample " << sample;
      CheckResult check;
      ASSERT_OK((*dev)->Check(CheckMode::kReadOnly, &check));
      ASSERT_EQ(check.corruptions, 0u) << "crash at event " << crash << " sample " << sample << ": "
                                       << (check.messages.empty() ? "" : check.messages.front());
      with_leaks += check.leaks > 0;
      const auto data = ReadBytes(**dev, 0, kDiskSize);
      for (uint64_t s = 0; s < kDiskSize / kSector; ++s) {
        const unsigned char got = data[s * kSector];
        const bool uniform = std::all_of(&data[s * kSector], &data[s * kSector] + kSector,
                                         [&](unsigned char c) { return c == got; });
        ASSERT_TRUE(uniform) << "torn sector " << s << " at crash " << crash;
        const bool ok = got == durable[s] || ever[s].count(got) > 0;
        ASSERT_TRUE(ok) << "sector " << s << " holds " << int(got) << ", durable "
                        << int(durable[s]) << " (crash at event " << crash << ")";
        if (!ever[s].count(got)) {
          ASSERT_EQ(got, initial) << "sector " << s << " (crash at event " << crash << ")";
        }
      }
      // Flushed data reads back unless a later write (possibly persisted) overwrote it.
      for (uint64_t s = 0; s < kDiskSize / kSector; ++s) {
        const unsigned char got = data[s * kSector];
        if (got == durable[s]) continue;
        // Only a write after the flush may replace flushed data.
        bool later = false;
        for (const auto& batch : w.batches) {
          for (const GuestWrite& g : batch) {
            if (g.fill == got && g.offset / kSector <= s && s < (g.offset + g.length) / kSector &&
                (got > durable[s] || durable[s] == initial)) {
              later = true;
            }
          }
        }
        ASSERT_TRUE(later) << "flushed sector " << s << " lost: holds " << int(got) << ", flushed "
                           << int(durable[s]) << " (crash at event " << crash << ")";
      }
    }
  }
  EXPECT_GT(images, 250);
  EXPECT_GT(with_leaks, 0) << "some crash points leave leaked blocks (and that is allowed)";
  // The last crash point is after Close: everything written is there.
  WriteSparse(image_path, CrashImage(base, log, events, &rng));
  auto last = Open("vhd+file:" + image_path, OpenOptions{.read_only = true});
  ASSERT_OK(last);
  const auto data = ReadBytes(**last, 0, kDiskSize);
  for (uint64_t s = 0; s < kDiskSize / kSector; ++s) {
    ASSERT_EQ(data[s * kSector], model[s]) << "sector " << s << " after Close";
  }
}

// Sectors whose bit is clear may hold anything on disk (other tools leave garbage there; the
// spec says zeros). A write into them must never expose that garbage, whatever part of the
// write reaches the disk before a crash: the bit reaches the disk only after the data.
TEST(VhdCrashGarbage, WriteIntoClearSectorsNeverExposesWhatWasThere) {
  TempDir dir;
  const std::string path = dir.File("garbage.vhd");
  ASSERT_OK(CreateImage("vhd", path, kDiskSize, "block_size=512K"));
  {
    auto dev = OpenImage(path);
    ASSERT_OK(dev);
    WriteBytes(**dev, 0, std::vector<unsigned char>(4096, 0x11));  // block 0: sectors 0-7
  }
  std::vector<unsigned char> base = ReadAll(path);
  const uint64_t block0 = uint64_t{BE32(base, BE64(base, 512 + 16))} * kSector + 512;
  std::fill(base.begin() + block0 + 4096, base.begin() + block0 + (512 << 10), 0xCD);
  WriteAll(path, base);
  ASSERT_EQ(ReadBytes(**OpenImage(path), 65536, 512)[0], 0) << "clear sectors read as zeros";

  std::vector<RecordedOp> log;
  {
    auto file = Open("file:" + path);
    ASSERT_OK(file);
    auto* rec = new RecordingDevice(std::move(*file), /*defer_completions=*/true);
    auto dev = vhd::VhdDevice::Open(DevicePtr(rec), {});
    ASSERT_OK(dev);
    WriteBytes(**dev, 65536, std::vector<unsigned char>(8192, 0x22));
    ASSERT_OK((*dev)->Close());
    log = rec->Log();
  }
  uint64_t events = 0;
  for (const RecordedOp& op : log) {
    events = std::max(events, op.submitted + 1);
    if (op.completed != UINT64_MAX) events = std::max(events, op.completed + 1);
  }
  const std::string image_path = dir.File("image.vhd");
  Rng rng(7);
  for (uint64_t crash = 0; crash <= events; ++crash) {
    for (int sample = 0; sample < 4; ++sample) {
      WriteSparse(image_path, CrashImage(base, log, crash, sample == 0 ? nullptr : &rng));
      auto dev = Open("vhd+file:" + image_path, OpenOptions{.read_only = true});
      ASSERT_OK(dev);
      const auto data = ReadBytes(**dev, 0, 512 << 10);
      for (uint64_t s = 8; s < (512 << 10) / kSector; ++s) {
        const unsigned char got = data[s * kSector];
        const bool written = s >= 128 && s < 144;
        ASSERT_TRUE(got == 0 || (written && got == 0x22))
            << "sector " << s << " reads " << int(got) << " after a crash at event " << crash;
      }
    }
  }
  WriteSparse(image_path, CrashImage(base, log, events, nullptr));
  EXPECT_EQ(ReadBytes(**Open("vhd+file:" + image_path), 65536, 8192),
            std::vector<unsigned char>(8192, 0x22));
}

INSTANTIATE_TEST_SUITE_P(Reserve, VhdCrash,
                         ::testing::Values(std::tuple<uint64_t, bool>{0, false},
                                           std::tuple<uint64_t, bool>{64ull << 20, false},
                                           std::tuple<uint64_t, bool>{0, true}),
                         [](const auto& info) {
                           return std::string(std::get<1>(info.param) ? "diff_" : "") +
                                  (std::get<0>(info.param) ? "64M" : "none");
                         });

}  // namespace
}  // namespace vstack::testing
