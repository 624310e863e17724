// The conformance suite: one set of behavioural tests run against every backend and stack
// registered in ConformanceTargets(). Semantics checked are those of docs/design.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "lib/iovec.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/conformance.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

class Conformance : public ::testing::TestWithParam<ConformanceTarget> {
 protected:
  void SetUp() override {
    auto d = GetParam().open(dir_.path());
    ASSERT_OK(d);
    dev_ = std::move(*d);
    auto q = dev_->OpenQueue();
    ASSERT_OK(q);
    q_ = std::move(*q);
  }

  void TearDown() override { CloseAll(); }

  void CloseAll() {
    if (q_) q_->WaitIdle();
    q_.reset();
    if (dev_) {
      EXPECT_OK(dev_->Close());
    }
    dev_.reset();
  }

  const Geometry& geo() const { return dev_->geometry(); }
  uint64_t lb() const { return geo().logical_block; }
  size_t align() const { return std::max<size_t>(geo().mem_alignment, 4096); }
  bool stores_data() const { return GetParam().stores_data; }

  std::error_code Write(uint64_t off, const void* data, size_t len, IoFlags flags = 0) {
    AlignedBuffer b(len, align());
    std::memcpy(b.data(), data, len);
    iovec v = b.iov();
    IoRequest r;
    r.op = Op::kWrite;
    r.flags = flags;
    r.offset = off;
    r.length = len;
    r.iov = &v;
    r.iovcnt = 1;
    return Execute(*q_, r);
  }

  std::vector<unsigned char> Read(uint64_t off, size_t len, std::error_code* ec = nullptr) {
    AlignedBuffer b(len, align());
    std::memset(b.data(), 0xEE, len);
    iovec v = b.iov();
    IoRequest r;
    r.op = Op::kRead;
    r.offset = off;
    r.length = len;
    r.iov = &v;
    r.iovcnt = 1;
    std::error_code e = Execute(*q_, r);
    if (ec) *ec = e;
    EXPECT_OK(e) << "read at " << off;
    auto* p = reinterpret_cast<unsigned char*>(b.data());
    return std::vector<unsigned char>(p, p + len);
  }

  std::error_code Simple(Op op, uint64_t off, uint64_t len, IoFlags flags = 0) {
    IoRequest r;
    r.op = op;
    r.flags = flags;
    r.offset = off;
    r.length = len;
    return Execute(*q_, r);
  }

  // Splits `len` bytes at `data` into 1..4 iovecs with lengths that are multiples of the
  // device's memory alignment (arbitrary when it is 1).
  std::vector<iovec> RandomSplit(Rng& rng, std::byte* data, size_t len) {
    const size_t g = geo().mem_alignment;
    std::vector<iovec> v;
    size_t pieces = 1 + rng.Below(4), done = 0;
    for (size_t i = 0; i + 1 < pieces && done < len; ++i) {
      size_t units = (len - done) / g;
      if (units < 2) break;
      size_t take = (1 + rng.Below(units - 1)) * g;
      v.push_back(iovec{data + done, take});
      done += take;
    }
    if (done < len) v.push_back(iovec{data + done, len - done});
    return v;
  }

  TempDir dir_;
  DevicePtr dev_;
  std::unique_ptr<IoQueue> q_;
};

TEST_P(Conformance, GeometryIsSane) {
  EXPECT_GE(geo().size_bytes, kConformanceSize);
  EXPECT_TRUE(lb() == 512 || lb() == 4096) << lb();
  EXPECT_EQ(geo().size_bytes % lb(), 0u);
  EXPECT_GE(geo().physical_block, lb());
  EXPECT_EQ(geo().mem_alignment & (geo().mem_alignment - 1), 0u) << "not a power of two";
  EXPECT_TRUE(dev_->Has(kCapRead));
  EXPECT_TRUE(dev_->Has(kCapWrite));
  EXPECT_TRUE(dev_->Has(kCapFlush));
  EXPECT_FALSE(dev_->kind().empty());
}

TEST_P(Conformance, NeverWrittenRangesReadAsZeros) {
  Rng rng(7);
  for (int i = 0; i < 16; ++i) {
    const uint64_t len = (1 + rng.Below(64)) * lb();
    const uint64_t off = rng.Below((geo().size_bytes - len) / lb() + 1) * lb();
    auto data = Read(off, len);
    EXPECT_TRUE(IsZero(data.data(), data.size())) << "at " << off;
  }
  auto tail = Read(geo().size_bytes - lb(), lb());
  EXPECT_TRUE(IsZero(tail.data(), tail.size()));
}

// Random batches of non-overlapping reads, writes, write-zeroes, discards and flushes, checked
// against a byte-for-byte model of the device, over several seeds.
TEST_P(Conformance, RandomIoMatchesModel) {
  if (!stores_data()) GTEST_SKIP() << "device drops writes";
  const uint64_t size = geo().size_bytes;
  std::vector<unsigned char> model(size, 0);
  std::vector<bool> unknown(size / lb(), false);  // discarded without kCapDiscardZeroes
  const uint64_t max_len = 256 * 1024;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Rng rng(seed);
    for (int round = 0; round < 24; ++round) {
      struct Pending {
        Op op;
        uint64_t off, len;
        AlignedBuffer buf;
        std::vector<iovec> iov;
      };
      std::vector<Pending> pend;
      std::vector<std::pair<uint64_t, uint64_t>> used;
      const int n = 1 + static_cast<int>(rng.Below(8));
      for (int k = 0; k < n; ++k) {
        uint64_t len = std::min<uint64_t>((1 + rng.Below(max_len / lb())) * lb(), size);
        uint64_t off = rng.Below((size - len) / lb() + 1) * lb();
        bool overlaps = std::any_of(used.begin(), used.end(), [&](auto& u) {
          return off < u.first + u.second && u.first < off + len;
        });
        if (overlaps) continue;
        used.emplace_back(off, len);
        const uint64_t pick = rng.Below(100);
        Op op = pick < 45 ? Op::kWrite
                : pick < 80 ? Op::kRead
                : pick < 88 ? Op::kWriteZeroes
                : pick < 95 ? Op::kDiscard
                            : Op::kFlush;
        if (op == Op::kDiscard && !dev_->Has(kCapDiscard)) op = Op::kRead;
        Pending p{op, off, len, AlignedBuffer(op == Op::kRead || op == Op::kWrite ? len : 0, align()), {}};
        if (op == Op::kWrite) {
          rng.Fill(p.buf.data(), len);
          std::memcpy(&model[off], p.buf.data(), len);
          std::fill(unknown.begin() + off / lb(), unknown.begin() + (off + len) / lb(), false);
        } else if (op == Op::kWriteZeroes) {
          std::memset(&model[off], 0, len);
          std::fill(unknown.begin() + off / lb(), unknown.begin() + (off + len) / lb(), false);
        } else if (op == Op::kDiscard) {
          std::memset(&model[off], 0, len);
          if (!dev_->Has(kCapDiscardZeroes)) {
            std::fill(unknown.begin() + off / lb(), unknown.begin() + (off + len) / lb(), true);
          }
        }
        if (op == Op::kRead || op == Op::kWrite) p.iov = RandomSplit(rng, p.buf.data(), len);
        pend.push_back(std::move(p));
      }
      std::vector<IoRequest> reqs(pend.size());
      for (size_t k = 0; k < pend.size(); ++k) {
        reqs[k].op = pend[k].op;
        if (pend[k].op != Op::kFlush) {
          reqs[k].offset = pend[k].off;
          reqs[k].length = pend[k].len;
        }
        reqs[k].iov = pend[k].iov.data();
        reqs[k].iovcnt = static_cast<uint32_t>(pend[k].iov.size());
      }
      RunBatch(*q_, reqs);
      for (size_t k = 0; k < pend.size(); ++k) {
        ASSERT_OK(reqs[k].status) << OpName(pend[k].op) << " at " << pend[k].off << " len "
                                  << pend[k].len << " (seed " << seed << ", round " << round << ")";
        if (pend[k].op != Op::kRead) continue;
        for (uint64_t b = 0; b < pend[k].len; b += lb()) {
          const uint64_t at = pend[k].off + b;
          if (unknown[at / lb()]) continue;
          ASSERT_EQ(std::memcmp(pend[k].buf.data() + b, &model[at], lb()), 0)
              << "read mismatch at " << at << " (seed " << seed << ", round " << round << ")";
        }
      }
    }
  }
  // The whole device matches the model.
  for (uint64_t off = 0; off < size; off += 1 << 20) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(1 << 20, size - off));
    auto data = Read(off, len);
    for (uint64_t b = 0; b < len; b += lb()) {
      if (unknown[(off + b) / lb()]) continue;
      ASSERT_EQ(std::memcmp(&data[b], &model[off + b], lb()), 0) << "final mismatch at " << off + b;
    }
  }
}

TEST_P(Conformance, VectoredWriteThenDifferentlySplitRead) {
  if (!stores_data()) GTEST_SKIP() << "device drops writes";
  Rng rng(11);
  const size_t len = 16 * 4096;
  AlignedBuffer src = RandomBuffer(rng, len, align());
  const size_t g = std::max<size_t>(geo().mem_alignment, 512);
  std::vector<iovec> wv = {{src.data(), 3 * g}, {src.data() + 3 * g, 5 * g},
                           {src.data() + 8 * g, len - 8 * g}};
  SyncIo io(*dev_);
  ASSERT_OK(io.WriteV(8 * lb(), wv));
  AlignedBuffer dst(len, align());
  std::vector<iovec> rv = {{dst.data(), len - 2 * g}, {dst.data() + len - 2 * g, g},
                           {dst.data() + len - g, g}};
  ASSERT_OK(io.ReadV(8 * lb(), rv));
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), len), 0);
}

TEST_P(Conformance, RejectsBadRequestsWithTheRightErrorAndChangesNothing) {
  const uint64_t size = geo().size_bytes;
  AlignedBuffer buf(2 * lb() + 4096, align());
  std::memset(buf.data(), 0xAB, buf.size());
  struct Case {
    const char* what;
    Op op;
    IoFlags flags;
    uint64_t off, len;
    size_t iov_len;  // bytes described by the iovec (when != len: mismatch)
    size_t buf_shift;
    Errc want;
  };
  std::vector<Case> cases = {
      {"read at end", Op::kRead, 0, size, lb(), lb(), 0, Errc::kOutOfRange},
      {"read across end", Op::kRead, 0, size - lb(), 2 * lb(), 2 * lb(), 0, Errc::kOutOfRange},
      {"write across end", Op::kWrite, 0, size - lb(), 2 * lb(), 2 * lb(), 0, Errc::kOutOfRange},
      {"offset overflow", Op::kRead, 0, UINT64_MAX - lb() + 1, 2 * lb(), 2 * lb(), 0,
       Errc::kOutOfRange},
      {"unaligned offset", Op::kWrite, 0, lb() / 2, lb(), lb(), 0, Errc::kUnaligned},
      {"unaligned length", Op::kRead, 0, 0, lb() + 1, lb() + 1, 0, Errc::kUnaligned},
      {"zero length", Op::kRead, 0, 0, 0, 0, 0, Errc::kInvalidArgument},
      {"iovec shorter than length", Op::kWrite, 0, 0, 2 * lb(), lb(), 0, Errc::kInvalidArgument},
      {"FUA on a read", Op::kRead, kIoFua, 0, lb(), lb(), 0, Errc::kInvalidArgument},
      {"unknown flag", Op::kWrite, 1u << 20, 0, lb(), lb(), 0, Errc::kInvalidArgument},
      {"discard across end", Op::kDiscard, 0, size - lb(), 2 * lb(), 0, 0, Errc::kOutOfRange},
      {"write-zeroes unaligned", Op::kWriteZeroes, 0, 1, lb(), 0, 0, Errc::kUnaligned},
  };
  if (geo().mem_alignment > 1) {
    cases.push_back({"misaligned buffer", Op::kWrite, 0, 0, lb(), lb(), 1,
                     Errc::kBadBufferAlignment});
  }
  for (const Case& c : cases) {
    iovec v{buf.data() + c.buf_shift, c.iov_len};
    IoRequest r;
    r.op = c.op;
    r.flags = c.flags;
    r.offset = c.off;
    r.length = c.len;
    if (c.iov_len) {
      r.iov = &v;
      r.iovcnt = 1;
    }
    std::vector<IoRequest> one{r};
    EXPECT_EQ(RunBatch(*q_, one), 1u) << c.what;
    EXPECT_EQ(one[0].status, make_error_code(c.want))
        << c.what << ": got " << one[0].status.message();
  }
  // Nothing was written by any rejected request.
  auto head = Read(0, 2 * lb());
  EXPECT_TRUE(IsZero(head.data(), head.size()));
  auto tail = Read(size - lb(), lb());
  EXPECT_TRUE(IsZero(tail.data(), tail.size()));
  EXPECT_EQ(dev_->Stats().in_flight, 0u);
}

TEST_P(Conformance, ManyRequestsInFlightEachCompleteOnce) {
  Rng rng(3);
  const int n = 64;
  const size_t len = 4096;
  AlignedBuffer data = RandomBuffer(rng, n * len, align());
  std::vector<iovec> iov(n);
  std::vector<IoRequest> reqs(n);
  for (int i = 0; i < n; ++i) {
    iov[i] = iovec{data.data() + i * len, len};
    reqs[i].op = Op::kWrite;
    reqs[i].offset = static_cast<uint64_t>(i) * 2 * len;  // every other 4 KiB block
    reqs[i].length = len;
    reqs[i].iov = &iov[i];
    reqs[i].iovcnt = 1;
  }
  EXPECT_EQ(RunBatch(*q_, reqs), static_cast<size_t>(n));
  for (auto& r : reqs) ASSERT_OK(r.status);
  EXPECT_EQ(q_->in_flight(), 0u);
  if (!stores_data()) GTEST_SKIP() << "device drops writes: nothing to read back";
  AlignedBuffer back(n * len, align());
  for (int i = 0; i < n; ++i) {
    iov[i] = iovec{back.data() + i * len, len};
    reqs[i].op = Op::kRead;
  }
  EXPECT_EQ(RunBatch(*q_, reqs), static_cast<size_t>(n));
  for (auto& r : reqs) ASSERT_OK(r.status);
  EXPECT_EQ(std::memcmp(data.data(), back.data(), n * len), 0);
}

TEST_P(Conformance, FlushAndFuaWritesSucceedAndReadBack) {
  std::vector<unsigned char> a(4096, 0x5A);
  ASSERT_OK(Write(0, a.data(), a.size(), kIoFua));
  ASSERT_OK(Simple(Op::kFlush, 0, 0));
  if (!stores_data()) GTEST_SKIP() << "device drops writes: nothing to read back";
  EXPECT_EQ(Read(0, a.size()), a);
}

TEST_P(Conformance, WriteZeroesReadsBackAsZeros) {
  Rng rng(5);
  const size_t len = 256 * 1024;
  AlignedBuffer data = RandomBuffer(rng, len, align());
  ASSERT_OK(Write(1 << 20, data.data(), len));
  // Zero a range that starts and ends inside the written data, once plain and once with FUA.
  ASSERT_OK(Simple(Op::kWriteZeroes, (1 << 20) + 4096, 64 * 1024));
  ASSERT_OK(Simple(Op::kWriteZeroes, (1 << 20) + 128 * 1024, 8 * lb(), kIoFua | kIoMayUnmap));
  auto back = Read(1 << 20, len);
  if (!stores_data()) GTEST_SKIP() << "device drops writes: nothing to read back";
  std::vector<unsigned char> want(reinterpret_cast<unsigned char*>(data.data()),
                                  reinterpret_cast<unsigned char*>(data.data()) + len);
  std::fill(want.begin() + 4096, want.begin() + 4096 + 64 * 1024, 0);
  std::fill(want.begin() + 128 * 1024, want.begin() + 128 * 1024 + 8 * lb(), 0);
  EXPECT_EQ(back, want);
  // A fast-zero request either zeroes without writing data or says it cannot.
  std::error_code ec = Simple(Op::kWriteZeroes, 1 << 20, len, kIoFastZero);
  if (dev_->Has(kCapFastZeroes)) {
    ASSERT_OK(ec);
    auto z = Read(1 << 20, len);
    EXPECT_TRUE(IsZero(z.data(), z.size()));
  } else {
    EXPECT_EQ(ec, make_error_code(Errc::kNotSupported));
  }
}

TEST_P(Conformance, DiscardLeavesNeighboursIntact) {
  if (!dev_->Has(kCapDiscard)) {
    EXPECT_EQ(Simple(Op::kDiscard, 0, lb()), make_error_code(Errc::kNotSupported));
    GTEST_SKIP() << "device has no discard (it answers kNotSupported, as it must)";
  }
  Rng rng(9);
  const size_t len = 192 * 1024;
  AlignedBuffer data = RandomBuffer(rng, len, align());
  ASSERT_OK(Write(2 << 20, data.data(), len));
  ASSERT_OK(Simple(Op::kDiscard, (2 << 20) + 64 * 1024, 64 * 1024));
  if (!stores_data()) GTEST_SKIP() << "device drops writes: nothing to read back";
  auto back = Read(2 << 20, len);
  EXPECT_EQ(std::memcmp(back.data(), data.data(), 64 * 1024), 0);
  EXPECT_EQ(std::memcmp(back.data() + 128 * 1024, data.data() + 128 * 1024, 64 * 1024), 0);
  if (dev_->Has(kCapDiscardZeroes)) {
    EXPECT_TRUE(IsZero(back.data() + 64 * 1024, 64 * 1024));
  }
}

// Four threads, each with its own queue and 8 requests always in flight (resubmitted from the
// completion callbacks), write their own quarter of the device; then each verifies it.
TEST_P(Conformance, ThreadsWithOwnQueuesHammerOneStack) {
  if (!dev_->Has(kCapThreadSafe)) GTEST_SKIP() << "device is single-queue";
  constexpr int kThreads = 4, kDepth = 8, kWritesPerSlot = 24;
  const uint64_t quarter = geo().size_bytes / kThreads / (1 << 20) * (1 << 20);
  const uint64_t slot_span = quarter / kDepth;
  std::atomic<int> failures{0};

  struct Slot {
    IoRequest req;
    AlignedBuffer buf;
    iovec iov;
    uint64_t base = 0;
    int remaining = 0;
    Rng rng{0};
    std::vector<unsigned char> model;  // this slot's span
    std::atomic<int>* failures = nullptr;
    IoQueue* queue = nullptr;
    uint64_t lb = 512;
  };
  // Prepares the slot's next random write within its own span and records it in the model.
  static constexpr auto kNextWrite = [](Slot& s) {
    const uint64_t len = (1 + s.rng.Below(16)) * 4096;
    const uint64_t off = s.rng.Below((s.model.size() - len) / s.lb + 1) * s.lb;
    s.rng.Fill(s.buf.data(), len);
    std::memcpy(&s.model[off], s.buf.data(), len);
    s.iov = iovec{s.buf.data(), len};
    s.req.op = Op::kWrite;
    s.req.offset = s.base + off;
    s.req.length = len;
    s.req.iov = &s.iov;
    s.req.iovcnt = 1;
  };

  auto worker = [&](int t) {
    auto q = dev_->OpenQueue();
    if (!q) {
      ++failures;
      return;
    }
    std::vector<std::unique_ptr<Slot>> slots;
    for (int d = 0; d < kDepth; ++d) {
      auto s = std::make_unique<Slot>();
      s->buf = AlignedBuffer(16 * 4096, align());
      s->base = t * quarter + d * slot_span;
      s->remaining = kWritesPerSlot;
      s->rng = Rng(t * 100 + d + 1);
      s->model.assign(slot_span, 0);
      s->failures = &failures;
      s->queue = q->get();
      s->lb = lb();
      s->req.user_data = s.get();
      s->req.on_complete = [](IoRequest& r) {
        Slot& s = *static_cast<Slot*>(r.user_data);
        if (r.status) ++*s.failures;
        if (--s.remaining > 0) {
          kNextWrite(s);  // the completion callback resubmits this slot's next write
          s.queue->Submit(r);
        }
      };
      kNextWrite(*s);
      slots.push_back(std::move(s));
    }
    std::vector<IoRequest*> batch;
    for (auto& s : slots) batch.push_back(&s->req);
    (*q)->Submit(batch);
    (*q)->WaitIdle();
    // Verify this thread's quarter through the same queue.
    for (auto& s : slots) {
      AlignedBuffer back(slot_span, align());
      iovec v = back.iov();
      IoRequest r;
      r.op = Op::kRead;
      r.offset = s->base;
      r.length = slot_span;
      r.iov = &v;
      r.iovcnt = 1;
      if (Execute(**q, r) || (stores_data() &&
                              std::memcmp(back.data(), s->model.data(), slot_span) != 0)) {
        ++failures;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  const LayerStats st = dev_->Stats();
  EXPECT_GE(st.of(Op::kWrite).ops, static_cast<uint64_t>(kThreads * kDepth * kWritesPerSlot));
  EXPECT_EQ(st.in_flight, 0u);
}

TEST_P(Conformance, StatsCountEveryRequestOnce) {
  // Counters are always on; latency and self-time paths with StatsMode::kLatency, for queues
  // opened afterwards, on every layer of the stack.
  q_.reset();
  for (BlockDevice* d = dev_.get(); d != nullptr; d = d->lower()) d->SetStatsMode(StatsMode::kLatency);
  auto q = dev_->OpenQueue();
  ASSERT_OK(q);
  q_ = std::move(*q);
  std::vector<unsigned char> a(4096, 1);
  for (int i = 0; i < 10; ++i) ASSERT_OK(Write(i * 4096, a.data(), a.size()));
  for (int i = 0; i < 5; ++i) Read(i * 4096, 8192);
  ASSERT_OK(Simple(Op::kFlush, 0, 0));
  std::error_code bad = Simple(Op::kRead, geo().size_bytes, lb());
  EXPECT_EQ(bad, make_error_code(Errc::kOutOfRange));
  const LayerStats st = dev_->Stats();
  EXPECT_EQ(st.of(Op::kWrite).ops, 10u);
  EXPECT_EQ(st.of(Op::kWrite).bytes, 10u * 4096);
  EXPECT_EQ(st.of(Op::kRead).ops, 6u);  // 5 good + 1 rejected
  EXPECT_EQ(st.of(Op::kRead).errors, 1u);
  EXPECT_EQ(st.of(Op::kFlush).ops, 1u);
  EXPECT_EQ(st.latency_of(Op::kWrite).count(), 10u);
  EXPECT_EQ(st.in_flight, 0u);
  // Every request's path ended at the top, and its levels' self times add up to its latency.
  EXPECT_EQ(st.paths.requests, 17u);
  uint64_t levels = 0, latency = 0;
  for (uint64_t v : st.paths.self_ns) levels += v;
  for (int op = 0; op < kOpCount; ++op) latency += st.latency[op].sum();
  EXPECT_EQ(levels, st.paths.total_ns);
  EXPECT_EQ(st.paths.total_ns, latency);
  EXPECT_EQ(st.paths.negative, 0u);
}

TEST_P(Conformance, CountsModeKeepsCountersAndReadsNoClock) {
  std::vector<unsigned char> a(4096, 1);
  ASSERT_OK(Write(0, a.data(), a.size()));
  const LayerStats st = dev_->Stats();
  EXPECT_EQ(st.of(Op::kWrite).ops, 1u);
  EXPECT_EQ(st.latency_of(Op::kWrite).count(), 0u);
  EXPECT_EQ(st.paths.requests, 0u);
  EXPECT_EQ(dev_->Counts().of(Op::kWrite).bytes, 4096u);
}

TEST_P(Conformance, MapExtentsCoversTheRangeInOrder) {
  std::vector<unsigned char> a(64 * 1024, 0x33);
  ASSERT_OK(Write(1 << 20, a.data(), a.size()));
  std::vector<Extent> ext;
  ASSERT_OK(dev_->MapExtents(0, geo().size_bytes, &ext));
  ASSERT_FALSE(ext.empty());
  uint64_t pos = 0;
  for (const Extent& e : ext) {
    EXPECT_EQ(e.offset, pos);
    EXPECT_GT(e.length, 0u);
    pos += e.length;
    if (stores_data() && e.offset < (1 << 20) + a.size() && (1 << 20) < e.offset + e.length) {
      EXPECT_EQ(e.flags & kExtentHole, 0u) << "written data reported as a hole at " << e.offset;
    }
  }
  EXPECT_EQ(pos, geo().size_bytes);
  EXPECT_FALSE(dev_->MapExtents(geo().size_bytes, lb(), &ext));
}

TEST_P(Conformance, ReopenReturnsFlushedData) {
  if (!GetParam().reopen) GTEST_SKIP() << "not persistent";
  Rng rng(21);
  const size_t len = 1 << 20;
  AlignedBuffer data = RandomBuffer(rng, len, align());
  ASSERT_OK(Write(3 << 20, data.data(), len));
  ASSERT_OK(Simple(Op::kFlush, 0, 0));
  CloseAll();
  auto d = GetParam().reopen(dir_.path());
  ASSERT_OK(d);
  dev_ = std::move(*d);
  auto q = dev_->OpenQueue();
  ASSERT_OK(q);
  q_ = std::move(*q);
  auto back = Read(3 << 20, len);
  EXPECT_EQ(std::memcmp(back.data(), data.data(), len), 0);
  auto zero = Read(0, 64 * 1024);
  EXPECT_TRUE(IsZero(zero.data(), zero.size()));
}

TEST_P(Conformance, CloseFailsWhileAQueueIsOpen) {
  EXPECT_FALSE(dev_->Close());  // q_ is still open
  q_.reset();
  EXPECT_OK(dev_->Close());
  EXPECT_FALSE(dev_->OpenQueue());  // closed devices give no new queues
}

// The one target that drops writes: what it reads is zeros, whatever was written.
TEST(NullDevice, ReadsZerosAfterWrites) {
  auto dev = Open("null:64M");
  ASSERT_OK(dev);
  {
    SyncIo io(**dev);
    AlignedBuffer buf(8192, 4096);
    std::memset(buf.data(), 0xFF, buf.size());
    ASSERT_OK(io.Write(0, buf.span()));
    ASSERT_OK(io.Read(0, buf.span()));
    EXPECT_TRUE(IsZero(buf.data(), buf.size()));
  }
  EXPECT_OK((*dev)->Close());
}

std::string TargetName(const ::testing::TestParamInfo<ConformanceTarget>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(All, Conformance, ::testing::ValuesIn(ConformanceTargets()), TargetName);

}  // namespace
}  // namespace vstack::testing
