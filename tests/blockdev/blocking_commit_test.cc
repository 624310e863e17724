// Layers that block a thread for a metadata commit (dedup, zstd, crc32c) over a dynamic VHD with
// several queues, on a device that completes requests only when its queue is polled again
// (a RecordingDevice deferring completions, as rbd completes on librbd's threads). The VHD writes a
// block's bitmap, and commits new blocks, through the queue of a thread that has a write waiting
// for it; the commit's own metadata I/O (on the layer's own queue of the VHD) may wait for that
// same bitmap write. The thread that commits must therefore let its data queue go idle before it
// blocks (GrainQueue::QuiesceBelow, the "Progress" rule of docs/design.md). Before that rule, a
// flush submitted while a write was in flight spun forever (the livelock that the Ceph
// conformance run of dedup+zstd+vhd+rbd met). A watchdog turns a hang into a failure.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/formats/vhd_test_util.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/recording_device.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

// Far beyond what these tests take (well under a second each, longer under TSan): only a hang
// gets there.
constexpr auto kDeadline = std::chrono::seconds(60);

// Runs `body` on a thread of its own. If it has not returned by the deadline, a thread is
// livelocked and cannot be stopped: the process exits with a message naming `what`, so that
// the test fails at once rather than when ctest's timeout kills it.
void WithinDeadline(const std::string& what, const std::function<void()>& body) {
  std::promise<void> finished;
  std::future<void> done = finished.get_future();
  std::thread runner([&] {
    body();
    finished.set_value();
  });
  if (done.wait_for(kDeadline) != std::future_status::ready) {
    std::fprintf(stderr, "DEADLOCK: %s did not finish within %lld s\n", what.c_str(),
                 static_cast<long long>(kDeadline.count()));
    std::fflush(stderr);
    std::_Exit(EXIT_FAILURE);
  }
  runner.join();
}

struct StackCase {
  std::string name;    // for test names
  std::string layers;  // the layers above the VHD, each formatting it
};

void PrintTo(const StackCase& c, std::ostream* os) { *os << c.name; }

// `layers` + a dynamic VHD of 64 MiB with `vhd_options`, written onto a 96 MiB memory device
// behind a RecordingDevice that defers every completion to a later Poll of its queue (as rbd
// completes on librbd's threads): nothing below the VHD completes inside Submit.
Result<DevicePtr> OpenOverDeferringVhd(const std::string& layers, const std::string& vhd_options) {
  VSTACK_ASSIGN_OR_RETURN(DevicePtr memory, Open("memory:96M"));
  DevicePtr below = MakeDevice<RecordingDevice>(std::move(memory), /*defer_completions=*/true);
  VSTACK_RETURN_IF_ERROR(vhd::WriteNewImage(*below, VhdParams(64 << 20, vhd_options)));
  return OpenLayersOn(layers + "+vhd", std::move(below));
}

IoRequest WriteOf(uint64_t offset, iovec* iov) {
  IoRequest r;
  r.op = Op::kWrite;
  r.offset = offset;
  r.length = iov->iov_len;
  r.iov = iov;
  r.iovcnt = 1;
  return r;
}

void Count(IoRequest& r) { ++*static_cast<int*>(r.user_data); }

class BlockingCommit : public ::testing::TestWithParam<StackCase> {};

// One thread, one queue. The VHD's blocks are 4 MiB, so the layer's metadata and its data
// share block 0: write B's bitmap write is in flight on the data queue when the flush's commit
// writes metadata into the same block through the layer's own queue.
TEST_P(BlockingCommit, FlushSubmittedWhileAWriteIsInFlightCompletes) {
  auto dev = OpenOverDeferringVhd(GetParam().layers, "block_size=4M");
  ASSERT_OK(dev);
  Rng rng(7);
  AlignedBuffer a = RandomBuffer(rng, 64 << 10), b = RandomBuffer(rng, 64 << 10);
  WithinDeadline("a flush submitted behind a write in flight", [&] {
    auto q = (*dev)->OpenQueue();
    ASSERT_OK(q);
    IoQueue& queue = **q;
    // A: written and completed, so that the commit has records to write.
    iovec va = a.iov();
    IoRequest wa = WriteOf(0, &va);
    ASSERT_OK(Execute(queue, wa));
    // B, then a flush, without polling in between.
    int done = 0;
    iovec vb = b.iov();
    IoRequest wb = WriteOf(1 << 20, &vb);
    IoRequest flush;
    flush.op = Op::kFlush;
    for (IoRequest* r : {&wb, &flush}) {
      r->on_complete = &Count;
      r->user_data = &done;
    }
    queue.Submit(wb);
    ASSERT_EQ(queue.in_flight(), 1u) << "write B completed inside Submit: nothing is tested";
    queue.Submit(flush);
    queue.WaitIdle();
    EXPECT_EQ(done, 2);
    EXPECT_OK(wb.status);
    EXPECT_OK(flush.status);
  });
  SyncIo io(**dev);
  AlignedBuffer back(64 << 10);
  ASSERT_OK(io.Read(0, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), a.data(), a.size()), 0);
  ASSERT_OK(io.Read(1 << 20, back.span()));
  EXPECT_EQ(std::memcmp(back.data(), b.data(), b.size()), 0);
}

// Four threads, each with its own queue, write fresh data (new VHD blocks of 512 KiB: group
// commits and bitmap writes shared between queues) and flush while the writes are in flight,
// each flush a commit that the others may wait for on the commit lock.
TEST_P(BlockingCommit, ThreadsWritingAndFlushingFinish) {
  auto dev = OpenOverDeferringVhd(GetParam().layers, "block_size=512K");
  ASSERT_OK(dev);
  constexpr int kThreads = 4, kRounds = 12, kWrites = 3;
  constexpr uint64_t kLen = 32 << 10;
  const uint64_t region = (*dev)->size_bytes() / kThreads / (1 << 20) * (1 << 20);
  ASSERT_GE(region, uint64_t{kRounds} * kWrites * kLen);
  std::vector<std::vector<AlignedBuffer>> data(kThreads);
  WithinDeadline("four threads writing and flushing", [&] {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto q = (*dev)->OpenQueue();
        ASSERT_OK(q);
        Rng rng(100 + t);
        for (int round = 0; round < kRounds; ++round) {
          // Each write and then the flush in a Submit of its own: the flush's commit starts
          // while the writes are in flight below.
          std::vector<IoRequest> reqs(kWrites + 1);
          std::vector<iovec> iov(kWrites);
          int done = 0;
          for (int w = 0; w <= kWrites; ++w) {
            if (w < kWrites) {
              data[t].push_back(RandomBuffer(rng, kLen));
              iov[w] = data[t].back().iov();
              reqs[w] = WriteOf(t * region + (round * kWrites + w) * kLen, &iov[w]);
            } else {
              reqs[w].op = Op::kFlush;
            }
            reqs[w].on_complete = &Count;
            reqs[w].user_data = &done;
            (*q)->Submit(reqs[w]);
          }
          (*q)->WaitIdle();
          EXPECT_EQ(done, kWrites + 1);
          for (const IoRequest& r : reqs) EXPECT_OK(r.status);
        }
      });
    }
    for (std::thread& th : threads) th.join();
  });
  SyncIo io(**dev);
  AlignedBuffer back(kLen);
  for (int t = 0; t < kThreads; ++t) {
    for (size_t i = 0; i < data[t].size(); ++i) {
      ASSERT_OK(io.Read(t * region + i * kLen, back.span()));
      EXPECT_EQ(std::memcmp(back.data(), data[t][i].data(), kLen), 0) << t << " " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    OverDeferringVhd, BlockingCommit,
    ::testing::Values(StackCase{"dedup", "dedup:size=32M,format=on"},
                      StackCase{"dedup_zstd", "dedup:size=32M,format=on+zstd:format=on"},
                      StackCase{"zstd", "zstd:size=32M,format=on"},
                      StackCase{"crc32c", "crc32c:format=on"}),
    [](const ::testing::TestParamInfo<StackCase>& info) { return info.param.name; });

}  // namespace
}  // namespace vstack::testing
