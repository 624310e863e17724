// The workload runner on real stacks (memory, null, passthrough): what it counts, how a run
// ends (duration, I/O count, Ctrl-C, a full device), and that the layers' statistics agree with
// what the workload saw.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "bench/workload/attribution.h"
#include "bench/workload/depth_driver.h"
#include "bench/workload/runner.h"
#include "bench/workload/stack_stats.h"
#include "blockdev/delay/delay_device.h"
#include "lib/clock.h"
#include "lib/layer.h"
#include "lib/registry.h"
#include "tests/testing/test_util.h"

namespace vstack::bench {
namespace {

// A layer that fails writes with ENOSPC once `budget` bytes have been written through it, like a
// filesystem filling up, and counts the writes it rejected.
class FullAfterLayer final : public Layer {
 public:
  FullAfterLayer(DevicePtr lower, uint64_t budget) : Layer("full_after", std::move(lower)), budget_(budget) {
    DeclareCounters({"rejected_writes"});
  }

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override {
    VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
    return std::unique_ptr<IoQueue>(new Queue(*this, std::move(lower)));
  }

 private:
  class Queue final : public LayerQueue {
   public:
    Queue(FullAfterLayer& dev, std::unique_ptr<IoQueue> lower) : LayerQueue(dev, std::move(lower)), dev_(dev) {}

   protected:
    void DoSubmit(std::span<IoRequest* const> batch) override {
      for (IoRequest* r : batch) {
        if (r->op == Op::kWrite && dev_.used_.fetch_add(r->length) + r->length > dev_.budget_) {
          Count(0);
          Complete(*r, SystemError(ENOSPC));
          continue;
        }
        Child* c = new Child{{}, r, this};
        c->req = *r;
        c->req.on_complete = &Queue::Done;
        c->req.user_data = c;
        lower().Submit(c->req);
      }
    }

   private:
    struct Child {
      IoRequest req;
      IoRequest* parent;
      Queue* queue;
    };
    static void Done(IoRequest& req) {
      Child* c = static_cast<Child*>(req.user_data);
      c->queue->Complete(*c->parent, req.status);
      delete c;
    }
    FullAfterLayer& dev_;
  };

  const uint64_t budget_;
  std::atomic<uint64_t> used_{0};
};

WorkloadKnobs Short() {
  WorkloadKnobs k;
  k.block_size = 4096;
  k.threads = 2;
  k.queue_depth = 4;
  k.duration_s = 0.3;
  k.warmup_s = 0.1;
  k.target_size = 16 << 20;
  return k;
}

TEST(Runner, TimedRunCountsEveryThreadAndAgreesWithTheLayers) {
  auto dev = Open("passthrough+memory:64M");
  ASSERT_OK(dev);
  auto r = RunWorkload(**dev, Short());
  ASSERT_OK(r);
  EXPECT_TRUE(r->error.empty()) << r->error;
  EXPECT_FALSE(r->interrupted);
  // The window closes at the first look past the duration (the warm-up is not in it).
  EXPECT_GE(r->seconds, Short().duration_s);
  ASSERT_EQ(r->threads.size(), 2u);
  const OpTotals total = r->Total();
  ASSERT_GT(total.ios, 100u);
  EXPECT_EQ(total.ios, r->Read().ios + r->Write().ios);
  EXPECT_EQ(total.latency.count(), total.ios);
  EXPECT_EQ(total.bytes, total.ios * 4096);
  EXPECT_NEAR(double(r->Write().ios) / double(total.ios), 0.5, 0.05);
  EXPECT_EQ(r->threads[0].Total().ios + r->threads[1].Total().ios, total.ios);
  EXPECT_GT(r->threads[1].Total().ios, 0u);
  EXPECT_EQ(r->Flush().ios, 0u);
  EXPECT_GT(r->cpu.process_s(), 0.0);
  // The host's CPU Ready covers both workload threads, where the kernel keeps schedstat.
  EXPECT_EQ(r->host_ready.measured, ReadSchedStat(kOwnSchedStatPath).has_value());
  if (r->host_ready.measured) {
    EXPECT_EQ(r->host_ready.threads, 2u);
    EXPECT_GE(r->host_ready.Pct(), 0.0);
  }

  ASSERT_EQ(r->layers.size(), 2u);
  EXPECT_EQ(r->layers[0].kind, "passthrough");
  EXPECT_EQ(r->layers[1].kind, "memory");
  const double top = double(r->layers[0].total_ops());
  // In a timed run every window edge is a snapshot taken while the workers run: the workers'
  // own edges, and each layer's counters read one after the other by the coordinating thread.
  // How far apart they fall depends on scheduling (an ASan build on a loaded machine measured
  // 5.7% between the workers and the top layer, and 6.8% between the two layers), so only a
  // gross disagreement fails here: a window that missed half the run, or counted another. The
  // exact agreement, of the windows and of the per-request ratios, is checked where it is
  // exact: a run of a fixed I/O count without warm-up (IoCountRunIsExact... below).
  EXPECT_NEAR(top, double(total.ios), double(total.ios) * 0.5);
  const Attribution a = Attribute(r->layers);
  ASSERT_EQ(a.layers.size(), 2u);
  EXPECT_NEAR(a.layers[0].in_total, 1.0, 0.5);
  EXPECT_NEAR(a.layers[0].out_total, 1.0, 0.5);
  EXPECT_TRUE(a.timed);
  EXPECT_TRUE(a.layers[1].backend);
  EXPECT_GT(a.layers[1].self_us_per_io, 0.0);
}

TEST(Runner, IoCountRunIsExactAndFlushesFollowTheInterval) {
  auto dev = Open("passthrough+memory:64M");
  ASSERT_OK(dev);
  WorkloadKnobs k = Short();
  k.io_count = 1001;
  k.threads = 3;
  k.warmup_s = 0;
  k.write_pct = 100;
  k.flush_interval = 4;
  k.pattern = AccessPattern::kSequential;
  auto r = RunWorkload(**dev, k);
  ASSERT_OK(r);
  EXPECT_EQ(r->Total().ios, 1001u);
  EXPECT_EQ(r->Write().ios, 1001u);
  EXPECT_NEAR(double(r->Flush().ios), 1001.0 / 4, 3.0);
  ASSERT_EQ(r->layers.size(), 2u);
  for (const LayerDelta& l : r->layers) {  // no warm-up: the workers' and every layer's window match exactly
    EXPECT_EQ(l.ops[int(Op::kWrite)], 1001u) << l.kind;
    EXPECT_EQ(l.ops[int(Op::kFlush)], r->Flush().ios) << l.kind;
    EXPECT_EQ(l.ops[int(Op::kRead)], 0u) << l.kind;
  }
  // So the attribution's ratios are exact too: a passthrough sends one request, of the same
  // bytes, per request.
  const Attribution a = Attribute(r->layers);
  ASSERT_EQ(a.layers.size(), 2u);
  EXPECT_DOUBLE_EQ(a.layers[0].in_total, 1.0);
  EXPECT_DOUBLE_EQ(a.layers[0].out_total, 1.0);
  EXPECT_DOUBLE_EQ(a.layers[0].write_bytes_ratio, 1.0);
  EXPECT_GT(r->seconds, 0.0);
}

// --task-cpu: each thread computes on its scheduler before each I/O. Work longer than the
// quantum takes longer than it in wall time too, so it yields at least once per I/O at RDY 0,
// and it is real CPU: the threads' CPU time holds all of it.
TEST(Runner, TaskCpuLongerThanTheQuantumYieldsEveryStepAndIsRealCpu) {
  auto dev = Open("null:16M");
  ASSERT_OK(dev);
  WorkloadKnobs k = Short();
  k.io_count = 40;
  k.queue_depth = 1;
  k.warmup_s = 0;
  k.quantum_ns = 4'000'000;
  k.task_cpu = "5ms";
  auto r = RunWorkload(**dev, k);
  ASSERT_OK(r);
  EXPECT_EQ(r->Total().ios, 40u);
  EXPECT_GE(r->yields.yields, 40u);
  EXPECT_EQ(r->yields.stalls, 0u);
  EXPECT_GE(r->cpu.threads_s, 40 * 0.005);
}

// --exchange: the threads run as one parallel query. With an I/O count that does not divide
// among the threads, some stop a step before the others; those that go on must not wait for
// them (the run would hang). Every I/O is done.
TEST(Runner, ExchangeRunsEveryIoWhenThreadsStopOneStepApart) {
  auto dev = Open("null:16M");
  ASSERT_OK(dev);
  WorkloadKnobs k = Short();
  k.threads = 4;
  k.queue_depth = 1;
  k.io_count = 402;  // 101, 101, 100, 100
  k.warmup_s = 0;
  k.exchange = true;
  k.quantum_ns = 4'000'000;
  k.schedulers = 2;
  k.task_cpu = "exp:50us";
  k.task_cpu_sleeps = true;
  auto r = RunWorkload(**dev, k);
  ASSERT_OK(r);
  EXPECT_EQ(r->Total().ios, 402u);
}

// A round that writes starts from a flushed stack, outside its measured window (librbd, for one,
// acknowledges writes early only after an image's first flush); a read-only round does not flush.
TEST(Runner, AWritingRoundFlushesTheStackOnceBeforeItsWindow) {
  for (const uint32_t write_pct : {0u, 50u}) {
    SCOPED_TRACE(write_pct);
    auto dev = Open("passthrough+memory:64M");
    ASSERT_OK(dev);
    WorkloadKnobs k = Short();
    k.io_count = 200;
    k.warmup_s = 0;
    k.write_pct = write_pct;
    const std::vector<LayerStats> before = SnapshotStack(**dev);
    auto r = RunWorkload(**dev, k);
    ASSERT_OK(r);
    const std::vector<LayerStats> after = SnapshotStack(**dev);
    const uint64_t flushes = after[0].of(Op::kFlush).ops - before[0].of(Op::kFlush).ops;
    EXPECT_EQ(r->Flush().ios, 0u);                         // none inside the window
    EXPECT_EQ(r->layers[0].ops[int(Op::kFlush)], 0u);
    EXPECT_EQ(flushes, write_pct > 0 ? 1u : 0u);            // one before it, when the round writes
  }
}

TEST(Runner, KnobsThatDoNotFitTheDeviceFailBeforeAnyIo) {
  auto dev = Open("memory:1M,block=4096");
  ASSERT_OK(dev);
  WorkloadKnobs k = Short();
  k.block_size = 512;
  auto r = RunWorkload(**dev, k);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("--bs"), std::string::npos);
  EXPECT_EQ((*dev)->Stats().of(Op::kWrite).ops, 0u);
}

TEST(Runner, AFullDeviceStopsTheRunAndKeepsWhatWasMeasured) {
  auto lower = Open("memory:64M");
  ASSERT_OK(lower);
  DevicePtr dev = MakeDevice<FullAfterLayer>(std::move(*lower), 2u << 20);
  WorkloadKnobs k = Short();
  k.write_pct = 100;
  k.warmup_s = 0;
  k.duration_s = 20;  // ends long before: the device fills up
  auto r = RunWorkload(*dev, k);
  ASSERT_OK(r);
  EXPECT_NE(r->error.find("write at offset"), std::string::npos) << r->error;
  EXPECT_NE(r->error.find("No space left on device"), std::string::npos) << r->error;
  EXPECT_FALSE(r->interrupted);
  EXPECT_GE(r->Write().ios, (2u << 20) / 4096 - 8);
  EXPECT_LE(r->Write().ios, (2u << 20) / 4096);
  EXPECT_GE(r->Write().errors, 1u);
  // The run stopped at the first error: only what was in flight then failed too (a run that
  // went on for its 20 s would count hundreds of thousands). A few batches of slack, since the
  // other thread sees the failure a moment later.
  EXPECT_LE(r->Write().errors, uint64_t(k.threads * k.queue_depth * 4));
  const Attribution a = Attribute(r->layers);
  ASSERT_FALSE(a.layers.empty());
  ASSERT_FALSE(a.layers[0].counters.empty());
  EXPECT_EQ(a.layers[0].counters[0].name, "rejected_writes");
  EXPECT_NE(a.layers[0].words.find("rejected_writes"), std::string::npos) << a.layers[0].words;
}

TEST(Runner, StopFlagInterruptsAndKeepsThePartialWindow) {
  auto dev = Open("null:64M");
  ASSERT_OK(dev);
  WorkloadKnobs k = Short();
  k.duration_s = 30;
  k.warmup_s = 0;
  std::atomic<bool> stop{false};
  RunControl control;
  control.stop = &stop;
  int progress_calls = 0;
  uint64_t ios_at_stop = 0;
  control.progress_interval_s = 0.05;
  control.on_progress = [&](const Progress& p) {
    ++progress_calls;
    EXPECT_GE(p.elapsed_s, 0.0);
    if (p.ios > 0 && !stop.load()) {  // the run is measuring: stop it now
      ios_at_stop = p.ios;
      stop.store(true);
    }
  };
  auto r = RunWorkload(**dev, k, control);
  ASSERT_OK(r);
  EXPECT_TRUE(r->interrupted);
  EXPECT_TRUE(stop.load());
  EXPECT_LT(r->seconds, k.duration_s);  // the flag ended it, not the duration
  EXPECT_GE(r->Total().ios, ios_at_stop);  // the partial window is kept
  EXPECT_GT(r->Total().ios, 0u);
  EXPECT_GE(progress_calls, 1);
}

}  // namespace
}  // namespace vstack::bench

namespace vstack::bench {
namespace {

// Alternates reads and writes, `limit` requests in all; counts what it saw.
struct AlternatingSource {
  int issued = 0, limit = 40, done = 0;
  bool Next(DriverSlot& s) {
    if (issued == limit) return false;
    s.req.op = issued++ % 2 == 0 ? Op::kRead : Op::kWrite;
    s.req.offset = 0;
    s.req.length = 4096;
    s.req.iov = &s.read_iov;
    s.req.iovcnt = 1;
    return true;
  }
  void Done(DriverSlot&) { ++done; }
};

// A request that completes while its batch is being submitted (here: a read with no service
// time, delivered by delay:'s submission) frees its slot at once, and the loop refills it
// before it waits for the next completion: the queue stays at depth. Before the fix the slot
// stayed empty until the next 1 ms write completed, so the 40 requests took 20 ms of synthetic
// time at QD2 instead of 10.
TEST(DepthDriver, ASlotFreedDuringTheSubmissionIsRefilledBeforeWaiting) {
  ManualClock clock;
  DelayConfig c;
  c.read = ServiceTime::Fixed(0);
  c.write = ServiceTime::Fixed(1'000'000);
  DevicePtr dev = MakeDevice<DelayDevice>(Open("memory:1M").value(), c, clock);
  auto q = dev->OpenQueue();
  ASSERT_TRUE(q);
  AlternatingSource source;
  const uint64_t t0 = clock.Now();
  {
    DepthDriver<AlternatingSource> driver(**q, source, 2, SlotBuffers{}, Resubmit::kFromLoop);
    driver.Run();
  }
  EXPECT_EQ(source.done, 40);
  EXPECT_LE(clock.Now() - t0, 10'000'000u) << "20 writes, two at a time, 1 ms each";
}

}  // namespace
}  // namespace vstack::bench
