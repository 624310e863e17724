// ForwardingLayer and ForwardingQueue (lib/forwarding_layer.h, lib/forwarding_queue.h): what a
// data-preserving layer inherits from the device below, and when each queue hook runs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "blockdev/memory/memory_device.h"
#include "lib/aligned_buffer.h"
#include "lib/forwarding_layer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"

namespace vstack {
namespace {

using testing::TempDir;

DevicePtr Memory() { return MakeDevice<MemoryDevice>(1 << 20, 512); }

// A layer that overrides nothing: everything comes from the device below.
class BareForwarder final : public ForwardingLayer {
 public:
  explicit BareForwarder(DevicePtr lower) : ForwardingLayer("bare", std::move(lower)) {}
};

TEST(ForwardingLayer, InheritsGeometryCapabilitiesAllocationAndResize) {
  TempDir dir;
  auto file = Open("file:" + dir.path() + "/t.img,create=on,size=1M");
  ASSERT_OK(file);
  BlockDevice* below = file->get();
  DevicePtr dev = MakeDevice<BareForwarder>(std::move(*file));
  EXPECT_EQ(dev->capabilities(), below->capabilities());
  EXPECT_TRUE(dev->Has(kCapResizable));
  EXPECT_EQ(dev->geometry().logical_block, below->geometry().logical_block);
  EXPECT_EQ(dev->Describe(), "bare");
  EXPECT_FALSE(dev->Space());  // no metadata of its own: `vstack space` looks below

  {
    SyncIo io(*dev);
    AlignedBuffer b(4096, 4096);
    std::memset(b.data(), 7, 4096);
    ASSERT_OK(io.Write(64 << 10, b.span()));
  }
  std::vector<Extent> mine, theirs;
  ASSERT_OK(dev->MapExtents(0, 1 << 20, &mine));
  ASSERT_OK(below->MapExtents(0, 1 << 20, &theirs));
  EXPECT_EQ(mine, theirs);

  ASSERT_OK(dev->Resize(2 << 20));
  EXPECT_EQ(dev->size_bytes(), 2u << 20);
  EXPECT_EQ(below->size_bytes(), 2u << 20);  // the device below grew
}

// SpaceOf describes this device's bytes, which are the device below's: a passthrough between
// two layers answers for the lower one.
TEST(ForwardingLayer, SpaceOfIsTheDeviceBelows) {
  auto dev = Open("passthrough+zstd:size=8M+memory:64M");
  ASSERT_OK(dev);
  {
    SyncIo io(**dev);
    AlignedBuffer b(64 << 10, 4096);
    std::memset(b.data(), 'a', b.size());
    ASSERT_OK(io.Write(0, b.span()));
  }
  const auto mine = (*dev)->SpaceOf(0, 1 << 20);
  const auto theirs = (*dev)->lower()->SpaceOf(0, 1 << 20);
  ASSERT_TRUE(mine.has_value());
  ASSERT_TRUE(theirs.has_value());
  EXPECT_EQ(mine->stored_bytes, theirs->stored_bytes);
  EXPECT_EQ(mine->logical_bytes_live, theirs->logical_bytes_live);
  EXPECT_FALSE((*dev)->Space());
}

// A queue that logs its hooks, refuses writes at offset 0, holds reads until the next Poll,
// and defers the request at offset 8 KiB from Accept to the next Poll.
class LoggingQueue final : public ForwardingQueue {
 public:
  LoggingQueue(BlockDevice& dev, std::unique_ptr<IoQueue> lower, std::vector<std::string>* log)
      : ForwardingQueue(dev, std::move(lower)), log_(*log) {}

 protected:
  void BeforeWork() override { log_.push_back("before"); }
  void Accept(IoRequest& req) override {
    log_.push_back("accept " + Name(req));
    if (req.offset == 8192) {
      deferred_ = &req;
      return;
    }
    Forward(req);
  }
  std::error_code Translate(const IoRequest& req, IoRequest*) override {
    log_.push_back("translate " + Name(req));
    return req.op == Op::kWrite && req.offset == 0 ? make_error_code(Errc::kReadOnly) : NoError();
  }
  void AfterSubmit() override { log_.push_back("after"); }
  void OnLowerDone(Forwarded& entry) override {
    log_.push_back("lower done " + Name(*entry.up));
    if (entry.up->op == Op::kRead) {
      held_.push_back(&entry);
      return;
    }
    ForwardingQueue::OnLowerDone(entry);
  }
  void Progress(bool wait) override {
    log_.push_back("progress");
    ForwardingQueue::Progress(wait);
    for (Forwarded* e : held_) Finish(*e, e->down.status);
    held_.clear();
    if (deferred_ != nullptr) {
      Forward(*deferred_);
      deferred_ = nullptr;
    }
  }

 private:
  static std::string Name(const IoRequest& req) {
    return std::string(OpName(req.op)) + "@" + std::to_string(req.offset);
  }
  std::vector<std::string>& log_;
  std::vector<Forwarded*> held_;
  IoRequest* deferred_ = nullptr;
};

class LoggingLayer final : public ForwardingLayer {
 public:
  explicit LoggingLayer(DevicePtr lower) : ForwardingLayer("logging", std::move(lower)) {}
  std::vector<std::string> log;

 protected:
  std::unique_ptr<ForwardingQueue> NewQueue(std::unique_ptr<IoQueue> lower) override {
    return std::make_unique<LoggingQueue>(*this, std::move(lower), &log);
  }
};

struct Done {
  int calls = 0;
  std::error_code status;
  static void Callback(IoRequest& req) {
    Done* d = static_cast<Done*>(req.user_data);
    ++d->calls;
    d->status = req.status;
  }
};

IoRequest Request(Op op, uint64_t offset, iovec* iov, Done* done) {
  IoRequest r;
  r.op = op;
  r.offset = offset;
  r.length = 4096;
  r.iov = iov;
  r.iovcnt = 1;
  r.on_complete = &Done::Callback;
  r.user_data = done;
  return r;
}

TEST(ForwardingQueue, HooksRunInTheOrderOfARequestsLife) {
  auto owned = MakeDevice<LoggingLayer>(Memory());
  auto& dev = static_cast<LoggingLayer&>(*owned);
  BlockDevice& memory = *dev.lower();
  AlignedBuffer buf(3 * 4096, 4096);
  iovec iov[3] = {{buf.data(), 4096}, {buf.data() + 4096, 4096}, {buf.data() + 8192, 4096}};
  Done refused, read, later;
  IoRequest reqs[3] = {Request(Op::kWrite, 0, &iov[0], &refused),
                       Request(Op::kRead, 4096, &iov[1], &read),
                       Request(Op::kWrite, 8192, &iov[2], &later)};
  {
    auto q = dev.OpenQueue();
    ASSERT_OK(q);
    IoRequest* batch[3] = {&reqs[0], &reqs[1], &reqs[2]};
    (*q)->Submit(batch);
    // The refused write completed inside Submit, and never reached the memory device; the
    // read went down and completed there (inline) but is held; the deferred write waits.
    EXPECT_EQ(refused.calls, 1);
    EXPECT_EQ(refused.status, make_error_code(Errc::kReadOnly));
    EXPECT_EQ(read.calls, 0);
    EXPECT_EQ(later.calls, 0);
    EXPECT_EQ(memory.Counts().of(Op::kWrite).ops, 0u);
    EXPECT_EQ(memory.Counts().of(Op::kRead).ops, 1u);
    const std::vector<std::string> submit = {"before",
                                             "accept write@0",
                                             "translate write@0",
                                             "accept read@4096",
                                             "translate read@4096",
                                             "accept write@8192",
                                             "lower done read@4096",
                                             "after"};
    EXPECT_EQ(dev.log, submit);

    dev.log.clear();
    (*q)->Poll(0);
    // Progress finished the held read and forwarded the deferred write, which went down at
    // the end of the Poll and completed there.
    EXPECT_EQ(read.calls, 1);
    EXPECT_FALSE(read.status);
    EXPECT_EQ(later.calls, 1);
    EXPECT_FALSE(later.status);
    EXPECT_EQ(memory.Counts().of(Op::kWrite).ops, 1u);
    const std::vector<std::string> poll = {"before", "progress", "translate write@8192",
                                           "lower done write@8192"};
    EXPECT_EQ(dev.log, poll);
    (*q)->WaitIdle();
  }
  EXPECT_EQ(dev.Counts().of(Op::kWrite).errors, 1u);
}

// Every kind of request goes through two plain forwarding levels and reaches the memory device.
TEST(ForwardingQueue, PlainQueueForwardsEveryOpUnchanged) {
  auto dev = Open("passthrough+passthrough+memory:1M");
  ASSERT_OK(dev);
  SyncIo io(**dev);
  AlignedBuffer a(8192, 4096), b(8192, 4096);
  std::memset(a.data(), 0x5a, a.size());
  ASSERT_OK(io.Write(4096, a.span()));
  ASSERT_OK(io.Read(4096, b.span()));
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0);
  ASSERT_OK(io.WriteZeroes(4096, 4096));
  ASSERT_OK(io.Discard(8192, 4096));
  ASSERT_OK(io.Flush());
  ASSERT_OK(io.Read(4096, b.span()));
  EXPECT_EQ(std::to_integer<int>(b.data()[0]), 0);
  BlockDevice* memory = (*dev)->lower()->lower();
  for (Op op : {Op::kRead, Op::kWrite, Op::kWriteZeroes, Op::kDiscard, Op::kFlush}) {
    EXPECT_EQ(memory->Counts().of(op).ops, (*dev)->Counts().of(op).ops) << OpName(op);
  }
}

}  // namespace
}  // namespace vstack
