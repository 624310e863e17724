// SharedSyncIo: blocking calls on one stack from many threads, one queue per thread, and a
// Close() that may run while other threads are inside calls. The ThreadSanitizer build runs
// these too. (NbdExport, built on it, has its own tests in tests/nbd/nbd_export_test.cc.)
#include "lib/shared_sync_io.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "lib/registry.h"
#include "tests/testing/gate_device.h"
#include "tests/testing/test_util.h"

namespace vstack {
namespace {

using testing::Gate;
using testing::GateDevice;

std::unique_ptr<SharedSyncIo> OpenShared(const std::string& spec) {
  auto dev = Open(spec);
  EXPECT_TRUE(testing::IsOk(dev));
  if (!dev) return nullptr;
  return std::make_unique<SharedSyncIo>(spec, std::move(*dev));
}

std::unique_ptr<SharedSyncIo> OpenGated(std::shared_ptr<Gate> gate) {
  auto dev = Open("memory:1M");
  EXPECT_TRUE(testing::IsOk(dev));
  if (!dev) return nullptr;
  return std::make_unique<SharedSyncIo>(
      "gate+memory:1M", MakeDevice<GateDevice>(std::move(*dev), std::move(gate)));
}

std::vector<std::byte> Pattern(size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::byte(static_cast<unsigned char>(i * 7 + seed));
  return v;
}

TEST(SharedSyncIo, EachThreadGetsItsOwnQueueAndGivesItBackWhenItExits) {
  auto io = OpenShared("dedup:size=16M+memory:32M");
  ASSERT_TRUE(io);
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<std::byte> data = Pattern(8192, t);
      std::vector<std::byte> back(8192);
      for (int i = 0; i < 100; ++i) {
        const uint64_t off = (uint64_t(t) << 22) + uint64_t(i % 32) * 8192;
        if (io->Write(off, data) || io->Read(off, back) || back != data) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(io->device().open_queues(), 0u);  // every thread has exited: no queue is left
  EXPECT_EQ(io->device().Stats().of(Op::kWrite).ops, kThreads * 100u);
  EXPECT_TRUE(testing::IsOk(io->Close()));
}

TEST(SharedSyncIo, CloseWaitsForAReadRunningOnAnotherThread) {
  auto gate = std::make_shared<Gate>();
  auto io = OpenGated(gate);
  ASSERT_TRUE(io);
  gate->Open();
  const std::vector<std::byte> data = Pattern(4096, 3);
  ASSERT_TRUE(testing::IsOk(io->Write(4096, data)));
  gate->Shut();

  std::vector<std::byte> back(4096);
  std::error_code read_status = make_error_code(Errc::kIo);
  std::thread reader([&] { read_status = io->Read(4096, back); });
  ASSERT_TRUE(gate->WaitHeld(1, std::chrono::minutes(1)));  // the read is inside the stack
  Status close_status = MakeError(Errc::kIo, "not run");
  std::thread closer([&] { close_status = io->Close(); });
  while (!io->closing()) std::this_thread::yield();
  // Closing: a new call is refused at once, while the running read goes on.
  std::vector<std::byte> other(4096);
  EXPECT_EQ(io->Read(0, other), make_error_code(Errc::kCancelled));
  bool queried = false;
  EXPECT_EQ(io->Query([&](BlockDevice&) { queried = true; }), make_error_code(Errc::kCancelled));
  EXPECT_FALSE(queried);
  gate->Open();
  reader.join();
  closer.join();
  EXPECT_TRUE(testing::IsOk(read_status));
  EXPECT_EQ(back, data);
  EXPECT_TRUE(testing::IsOk(close_status));
  EXPECT_EQ(io->device().open_queues(), 0u);
  EXPECT_EQ(io->Read(0, other), make_error_code(Errc::kCancelled));
  EXPECT_TRUE(testing::IsOk(io->Close()));  // idempotent
}

TEST(SharedSyncIo, AThreadMovesOnFromAClosedStackToAnother) {
  auto first = OpenShared("memory:1M");
  auto second = OpenShared("memory:1M");
  ASSERT_TRUE(first && second);
  std::vector<std::byte> buf(4096);
  ASSERT_TRUE(testing::IsOk(first->Read(0, buf)));  // this thread's slot for `first`
  ASSERT_TRUE(testing::IsOk(first->Close()));
  EXPECT_TRUE(testing::IsOk(second->Read(0, buf)));  // forgets the closed slot
  EXPECT_EQ(first->Read(0, buf), make_error_code(Errc::kCancelled));
  EXPECT_TRUE(testing::IsOk(second->Close()));
}

TEST(SharedSyncIo, ZeroLengthCallsSucceedAndChecksComeFromTheQueue) {
  auto io = OpenShared("memory:1M");
  ASSERT_TRUE(io);
  std::vector<std::byte> buf(4096);
  EXPECT_TRUE(testing::IsOk(io->Read(1 << 20, std::span<std::byte>())));
  EXPECT_TRUE(testing::IsOk(io->Discard(0, 0)));
  EXPECT_EQ(io->Read(1 << 20, buf), make_error_code(Errc::kOutOfRange));
  EXPECT_EQ(io->Read(100, std::span(buf).first(512)), make_error_code(Errc::kUnaligned));
  EXPECT_TRUE(testing::IsOk(io->WriteZeroes(0, 8192)));
  uint64_t errors = 0;
  EXPECT_TRUE(testing::IsOk(
      io->Query([&](BlockDevice& d) { errors = d.Stats().of(Op::kRead).errors; })));
  EXPECT_EQ(errors, 2u);  // the two refused reads
  EXPECT_TRUE(testing::IsOk(io->Close()));
}

}  // namespace
}  // namespace vstack
