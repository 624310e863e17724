// The base class's own behaviour, seen through a test layer with chosen capabilities:
// validation, emulation of FUA and write-zeroes, splitting above max_transfer, completion
// delivery (inline, later, from another thread) and statistics.
#include "lib/block_device.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "blockdev/memory/memory_device.h"
#include "lib/aligned_buffer.h"
#include "lib/forwarding_queue.h"
#include "lib/layer.h"
#include "lib/progress.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"

namespace vstack {
namespace {

using testing::Rng;

struct Seen {
  Op op;
  IoFlags flags;
  uint64_t offset, length;
};

// A layer over memory that offers only `caps`, limits transfers to `max_transfer`, records every
// request it is given, and completes them later (in Poll) or from another thread if asked.
class LimitedDevice final : public Layer {
 public:
  enum class Completion { kInline, kInPoll, kOtherThread };
  LimitedDevice(DevicePtr lower, Capabilities caps, uint64_t max_transfer, Completion how)
      : Layer("limited", std::move(lower)), how_(how) {
    set_capabilities(caps);
    mutable_geometry().max_transfer = max_transfer;
  }
  std::vector<Seen> seen;
  Completion how_;

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;
};

class LimitedQueue final : public LayerQueue {
 public:
  LimitedQueue(LimitedDevice& d, std::unique_ptr<IoQueue> lower)
      : LayerQueue(d, std::move(lower)), dev_(d), io_(d.lower_device()) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    for (IoRequest* r : batch) {
      dev_.seen.push_back({r->op, r->flags, r->offset, r->length});
      std::error_code ec = Run(*r);
      switch (dev_.how_) {
        case LimitedDevice::Completion::kInline: Complete(*r, ec); break;
        case LimitedDevice::Completion::kInPoll:
        case LimitedDevice::Completion::kOtherThread: later_.push_back({r, ec}); break;
      }
    }
  }
  // Completes what DoSubmit deferred: here, or from another thread through PostCompletion.
  // Then polls below, as a layer that retries deferred work does (GrainQueue::DoPoll).
  void DoPoll(bool wait) override {
    auto later = std::move(later_);
    later_.clear();
    if (dev_.how_ == LimitedDevice::Completion::kOtherThread) {
      std::thread([this, later] {
        for (auto& [r, ec] : later) PostCompletion(*r, ec);
      }).join();
    } else {
      for (auto& [r, ec] : later) Complete(*r, ec);
    }
    LayerQueue::DoPoll(wait);
  }

 private:
  std::error_code Run(IoRequest& r) {
    switch (r.op) {
      case Op::kRead: return io_.ReadV(r.offset, {r.iov, r.iovcnt});
      case Op::kWrite: return io_.WriteV(r.offset, {r.iov, r.iovcnt});
      case Op::kFlush: return io_.Flush();
      case Op::kDiscard: return io_.Discard(r.offset, r.length);
      case Op::kWriteZeroes: return io_.WriteZeroes(r.offset, r.length);
    }
    return {};
  }
  LimitedDevice& dev_;
  SyncIo io_;
  std::vector<std::pair<IoRequest*, std::error_code>> later_;
};

Result<std::unique_ptr<IoQueue>> LimitedDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(auto lower, lower_device().OpenQueue());
  return std::unique_ptr<IoQueue>(new LimitedQueue(*this, std::move(lower)));
}

constexpr Capabilities kBasic = kCapRead | kCapWrite | kCapFlush;

struct Fixture {
  explicit Fixture(Capabilities caps, uint64_t max_transfer = 0,
                   LimitedDevice::Completion how = LimitedDevice::Completion::kInline) {
    dev = MakeDevice<LimitedDevice>(MakeDevice<MemoryDevice>(16 << 20, 512), caps, max_transfer, how);
    limited = static_cast<LimitedDevice*>(dev.get());
  }
  DevicePtr dev;
  LimitedDevice* limited;
};

TEST(IoQueueEmulation, FuaWithoutNativeFuaBecomesWriteThenFlush) {
  Fixture f(kBasic);
  SyncIo io(*f.dev);
  std::vector<std::byte> a(4096, std::byte{7});
  ASSERT_OK(io.Write(0, a, kIoFua));
  ASSERT_EQ(f.limited->seen.size(), 2u);
  EXPECT_EQ(f.limited->seen[0].op, Op::kWrite);
  EXPECT_EQ(f.limited->seen[0].flags & kIoFua, 0u);
  EXPECT_EQ(f.limited->seen[1].op, Op::kFlush);
  const LayerStats st = f.dev->Stats();
  EXPECT_EQ(st.of(Op::kWrite).ops, 1u) << "the caller's one request is counted once";
  EXPECT_EQ(st.of(Op::kFlush).ops, 0u) << "emulation requests are not counted as the caller's";
}

TEST(IoQueueEmulation, NativeFuaIsPassedThrough) {
  Fixture f(kBasic | kCapFua);
  SyncIo io(*f.dev);
  std::vector<std::byte> a(4096);
  ASSERT_OK(io.Write(0, a, kIoFua));
  ASSERT_EQ(f.limited->seen.size(), 1u);
  EXPECT_TRUE(f.limited->seen[0].flags & kIoFua);
}

TEST(IoQueueEmulation, WriteZeroesWithoutSupportWritesZeros) {
  Fixture f(kBasic);
  SyncIo io(*f.dev);
  std::vector<std::byte> ones(3 << 20, std::byte{1});
  ASSERT_OK(io.Write(0, ones));
  f.limited->seen.clear();
  ASSERT_OK(io.WriteZeroes(512, (3 << 20) - 1024));
  for (const Seen& s : f.limited->seen) EXPECT_EQ(s.op, Op::kWrite);
  EXPECT_EQ(f.limited->seen.size(), 3u) << "pieces of at most 1 MiB";
  std::vector<std::byte> back(3 << 20);
  ASSERT_OK(io.Read(0, back));
  EXPECT_EQ(back[0], std::byte{1});
  EXPECT_EQ(back[511], std::byte{1});
  EXPECT_EQ(back[512], std::byte{0});
  EXPECT_EQ(back[(3 << 20) - 513], std::byte{0});
  EXPECT_EQ(back[(3 << 20) - 512], std::byte{1});
  // Fast zero cannot be honoured by writing zeros.
  EXPECT_EQ(io.WriteZeroes(0, 512, kIoFastZero), make_error_code(Errc::kNotSupported));
}

TEST(IoQueueEmulation, SplitsAboveMaxTransferAndReassembles) {
  Fixture f(kBasic | kCapWriteZeroes, 64 * 1024);
  SyncIo io(*f.dev);
  Rng rng(1);
  AlignedBuffer data = testing::RandomBuffer(rng, 200 * 1024);
  ASSERT_OK(io.Write(4096, data.span()));
  ASSERT_EQ(f.limited->seen.size(), 4u);  // 64K + 64K + 64K + 8K
  for (const Seen& s : f.limited->seen) EXPECT_LE(s.length, 64u * 1024);
  EXPECT_EQ(f.limited->seen[3].offset, 4096u + 192 * 1024);
  AlignedBuffer back(200 * 1024);
  ASSERT_OK(io.Read(4096, back.span()));
  EXPECT_EQ(std::memcmp(data.data(), back.data(), data.size()), 0);
}

TEST(IoQueueEmulation, DiscardWithoutSupportIsRejected) {
  Fixture f(kBasic);
  SyncIo io(*f.dev);
  EXPECT_EQ(io.Discard(0, 4096), make_error_code(Errc::kNotSupported));
  EXPECT_TRUE(f.limited->seen.empty()) << "rejected before the layer saw it";
}

// A write of `v` at offset 0 whose callback counts into `calls`.
IoRequest CountedWrite(iovec* v, int* calls) {
  IoRequest r;
  r.op = Op::kWrite;
  r.length = v->iov_len;
  r.iov = v;
  r.iovcnt = 1;
  r.user_data = calls;
  r.on_complete = [](IoRequest& req) { ++*static_cast<int*>(req.user_data); };
  return r;
}

// Counts the waits through the progress seam (lib/progress.h) of the thread it is installed on.
class CountingWaiter final : public ProgressWaiter {
 public:
  CountingWaiter() : previous_(SetProgressWaiter(this)) {}
  ~CountingWaiter() override { SetProgressWaiter(previous_); }
  void Wait(const char*) override { ++waits; }
  int waits = 0;

 private:
  ProgressWaiter* previous_;
};

// Completions made later (in the layer's poll) or on another thread arrive in Poll. The poll that
// made them does not wait through the progress seam afterwards (LimitedQueue polls below, where
// nothing is in flight): the simulator's scheduler sees no activity in such a completion and
// took that wait for the last one (vhdx+crc32c+dedup seeds 394, 1074 and 1296: crc32c's retried
// write completed, then its queue waited for good; docs/testing.md, "Bugs found").
TEST(IoQueueCompletion, LaterAndCrossThreadCompletionsArriveInPoll) {
  for (auto how : {LimitedDevice::Completion::kInPoll, LimitedDevice::Completion::kOtherThread}) {
    Fixture f(kBasic, 0, how);
    auto q = f.dev->OpenQueue();
    ASSERT_OK(q);
    std::vector<std::byte> a(4096);
    iovec v{a.data(), a.size()};
    int calls = 0;
    IoRequest r = CountedWrite(&v, &calls);
    (*q)->Submit(r);
    EXPECT_EQ(calls, 0) << "completes in Poll, not in Submit";
    EXPECT_EQ((*q)->in_flight(), 1u);
    CountingWaiter waiter;
    EXPECT_EQ((*q)->Poll(1), 1u);
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(waiter.waits, 0) << "waited with its own completion ready";
    EXPECT_EQ((*q)->in_flight(), 0u);
    EXPECT_EQ((*q)->Poll(0), 0u);
    EXPECT_EQ(calls, 1);
  }
}

TEST(IoQueueCompletion, CallbacksResubmittingDoNotRecurse) {
  // 100000 requests resubmitted from their own inline completions must not grow the stack.
  DevicePtr dev = MakeDevice<MemoryDevice>(1 << 20, 512);
  auto q = dev->OpenQueue();
  ASSERT_OK(q);
  struct State {
    IoQueue* q;
    int left = 100000;
    std::vector<std::byte> buf = std::vector<std::byte>(512);
    iovec v{};
  } st{q->get()};
  st.v = iovec{st.buf.data(), 512};
  IoRequest r;
  r.op = Op::kRead;
  r.length = 512;
  r.iov = &st.v;
  r.iovcnt = 1;
  r.user_data = &st;
  r.on_complete = [](IoRequest& req) {
    auto* s = static_cast<State*>(req.user_data);
    if (--s->left > 0) s->q->Submit(req);
  };
  (*q)->Submit(r);
  (*q)->WaitIdle();
  EXPECT_EQ(st.left, 0);
  EXPECT_EQ(dev->Stats().of(Op::kRead).ops, 100000u);
}

TEST(BlockDeviceStats, SnapshotIncludesClosedQueues) {
  DevicePtr dev = MakeDevice<MemoryDevice>(1 << 20, 512);
  {
    SyncIo io(*dev);
    std::vector<std::byte> a(1024);
    ASSERT_OK(io.Write(0, a));
  }
  SyncIo io2(*dev);
  std::vector<std::byte> b(512);
  ASSERT_OK(io2.Read(0, b));
  const LayerStats st = dev->Stats();
  EXPECT_EQ(st.of(Op::kWrite).ops, 1u);
  EXPECT_EQ(st.of(Op::kWrite).bytes, 1024u);
  EXPECT_EQ(st.of(Op::kRead).ops, 1u);
}

// A layer that forwards every request unchanged (a plain ForwardingQueue) but asks for
// buffers aligned to `mem_alignment`.
class AlignedLayer final : public Layer {
 public:
  AlignedLayer(DevicePtr lower, uint32_t mem_alignment) : Layer("aligned", std::move(lower)) {
    mutable_geometry().mem_alignment = mem_alignment;
  }

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override {
    VSTACK_ASSIGN_OR_RETURN(auto lower, lower_device().OpenQueue());
    return std::unique_ptr<IoQueue>(new ForwardingQueue(*this, std::move(lower)));
  }
};

// Buffers are checked once only where the layer above checked them by a rule as strict: a
// layer accepting any buffer over one that needs 4 KiB alignment still has the lower one
// refuse a misaligned buffer, and an aligned one goes through.
TEST(IoQueueValidation, ForwardedRequestsAreCheckedWhereTheRulesBelowAreStricter) {
  DevicePtr dev = MakeDevice<AlignedLayer>(
      MakeDevice<AlignedLayer>(MakeDevice<MemoryDevice>(1 << 20, 512), 4096), 1);
  EXPECT_FALSE(ForwardedChecksSuffice(*dev, *dev->lower()));
  EXPECT_TRUE(ForwardedChecksSuffice(*dev->lower(), *dev->lower()->lower()));
  AlignedBuffer buf(8192, 4096);
  SyncIo io(*dev);
  EXPECT_EQ(io.Read(0, std::span<std::byte>(buf.data() + 512, 4096)),
            make_error_code(Errc::kBadBufferAlignment));
  ASSERT_OK(io.Read(0, std::span<std::byte>(buf.data(), 4096)));
  EXPECT_EQ(dev->lower()->Stats().of(Op::kRead).errors, 1u);  // the aligned layer refused it
  EXPECT_EQ(dev->lower()->lower()->Stats().of(Op::kRead).ops, 1u);  // only one reached memory
}

// `stats=` in a spec chooses what a layer keeps, and the choice stays when a tool later sets a
// mode on the whole stack (as `vstack bench` sets latency).
TEST(BlockDeviceStats, SpecOptionChoosesWhatALayerKeeps) {
  auto dev = Open("passthrough:stats=counts+passthrough:stats=latency+memory:1M");
  ASSERT_TRUE(dev) << dev.error().ToString();
  for (BlockDevice* d = dev->get(); d != nullptr; d = d->lower()) {
    d->SetStatsMode(StatsMode::kLatency);
  }
  {
    SyncIo io(**dev);
    std::vector<std::byte> b(4096);
    ASSERT_OK(io.Read(0, b));
  }
  BlockDevice* top = dev->get();
  BlockDevice* middle = top->lower();
  BlockDevice* memory = middle->lower();
  EXPECT_EQ(top->stats_mode(), StatsMode::kCounts);
  EXPECT_EQ(middle->stats_mode(), StatsMode::kLatency);
  EXPECT_EQ(memory->stats_mode(), StatsMode::kLatency);  // no stats= in the spec
  // Counts everywhere; a latency histogram only where latency is kept.
  EXPECT_EQ(top->Stats().of(Op::kRead).ops, 1u);
  EXPECT_EQ(top->Stats().latency_of(Op::kRead).count(), 0u);
  EXPECT_EQ(middle->Stats().of(Op::kRead).ops, 1u);
  EXPECT_EQ(middle->Stats().latency_of(Op::kRead).count(), 1u);
  EXPECT_EQ(memory->Stats().latency_of(Op::kRead).count(), 1u);

  // Histogram buckets exist only where latency is kept (counts-mode devices and snapshots
  // stay a few hundred bytes: every open builds several of them).
  EXPECT_FALSE(top->Stats().latency_of(Op::kRead).allocated());
  EXPECT_FALSE(top->Stats().paths.self[0].allocated());
  EXPECT_TRUE(middle->Stats().latency_of(Op::kRead).allocated());

  auto bad = Open("passthrough:stats=always+memory:1M");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("'stats' of 'passthrough' must be counts or latency"),
            std::string::npos)
      << bad.error().message;
}

}  // namespace
}  // namespace vstack

namespace vstack {
namespace {

// A sparse memory device maps by skipping absent subtrees of its page tree: a petabyte with
// three written pages maps to seven extents, in a number of steps bounded by the tree (the
// page-by-page walk never finished), and `vstack map memory:1P` returns.
TEST(MemoryDeviceMap, PetabyteMapsByExtentsNotPages) {
  MemoryDevice dev(1ull << 50, 512);
  SyncIo io(dev);
  AlignedBuffer page(4096, 4096);
  std::memset(page.data(), 1, 4096);
  for (uint64_t at : {uint64_t{0}, uint64_t{1} << 40, (uint64_t{1} << 50) - 8192}) {
    ASSERT_FALSE(io.Write(at, page.span()));
  }
  std::vector<Extent> out;
  ASSERT_TRUE(dev.MapExtents(0, dev.size_bytes(), &out));
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[0], (Extent{0, 4096, 0}));
  EXPECT_EQ(out[1], (Extent{4096, (uint64_t{1} << 40) - 4096, kExtentHole | kExtentZero}));
  EXPECT_EQ(out[2], (Extent{uint64_t{1} << 40, 4096, 0}));
  EXPECT_EQ(out[4], (Extent{(uint64_t{1} << 50) - 8192, 4096, 0}));
  EXPECT_EQ(out[5], (Extent{(uint64_t{1} << 50) - 4096, 4096, kExtentHole | kExtentZero}));
  std::vector<Extent> part;  // unaligned ranges are clipped
  ASSERT_TRUE(dev.MapExtents(100, 5000, &part));
  ASSERT_EQ(part.size(), 2u);
  EXPECT_EQ(part[0], (Extent{100, 3996, 0}));
  EXPECT_EQ(part[1], (Extent{4096, 1004, kExtentHole | kExtentZero}));

  auto r = testing::RunVstack("map --output=json memory:1P");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("\"hole\": true"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace vstack
