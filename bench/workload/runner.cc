#include "bench/workload/runner.h"


#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "bench/workload/depth_driver.h"
#include "bench/workload/exchange.h"
#include "bench/workload/host_ready.h"
#include "bench/workload/offsets.h"
#include "bench/workload/quantum_scheduler.h"
#include "bench/workload/stack_stats.h"
#include "bench/workload/write_content.h"
#include "lib/aligned_buffer.h"
#include "lib/clock.h"
#include "lib/cpu_account.h"
#include "lib/sync_io.h"

namespace vstack::bench {
namespace {

enum Phase : int { kWarmup = 0, kMeasure = 1, kStop = 2 };

// State shared by the coordinating thread and the workers.
struct Shared {
  std::atomic<int> phase{kWarmup};
  std::atomic<bool> go{false};
  std::atomic<bool> failed{false};
  std::atomic<uint32_t> opened{0};
  bool count_mode = false;                // measured window = an I/O count instead of a duration
  QuantumScheduler* scheduler = nullptr;  // threads take turns on it; null = free-running
  std::optional<ServiceTime> task_cpu;    // CPU worked before each I/O, on the scheduler
  std::optional<Exchange> exchange;  // --exchange: every thread's step ends here
  CpuAccount engine;  // the CPU the workload threads spend outside every layer (sampled)
};

// One thread of the workload: its own queue, `queue_depth` slots (a DepthDriver, whose source
// this is), RNG, offsets and content.
class Worker {
 public:
  Worker(BlockDevice& device, const WorkloadKnobs& k, uint32_t index, uint64_t region,
         uint64_t quota, Shared& shared)
      : device_(device),
        k_(k),
        shared_(shared),
        quota_(quota),
        rng_(k.seed, index),
        offsets_(k, region, index, k.threads),
        content_(k, index),
        cpu_rng_(k.seed * 0x9e3779b97f4a7c15ull + index) {
    result.index = index;
  }

  void Run() {
    tid = gettid();
    // Sampled while the run samples CPU: what no layer's code does is the engine's.
    std::optional<EnrolledThread> enrolled(std::in_place, shared_.engine);
    auto queue = device_.OpenQueue();
    if (!queue) {
      open_error = queue.error().ToString();
      shared_.failed.store(true);
      if (shared_.exchange) shared_.exchange->Leave();
      shared_.opened.fetch_add(1);
      enrolled.reset();
      finished.store(true);
      return;
    }
    {
      const size_t align = std::max<size_t>(4096, device_.geometry().mem_alignment);
      DepthDriver<Worker> driver(**queue, *this, k_.queue_depth,
                                 SlotBuffers{.block_size = k_.block_size, .per_slot = 2,
                                             .alignment = align},
                                 Resubmit::kFromLoop);
      for (DriverSlot& s : driver.slots()) {
        content_.Initialize(static_cast<std::byte*>(s.write_iov.iov_base), k_.block_size);
      }
      shared_.opened.fetch_add(1);
      while (!shared_.go.load(std::memory_order_acquire)) std::this_thread::yield();
      if (shared_.scheduler) shared_.scheduler->Run(result.index);
      driver.Run();
      if (shared_.scheduler) shared_.scheduler->Suspend(result.index);
      if (shared_.exchange) shared_.exchange->Leave();  // the others go on without it
    }
    queue->reset();
    enrolled.reset();
    exit_sched = ReadSchedStat(kOwnSchedStatPath);
    finished.store(true, std::memory_order_release);
  }

  // Its scheduling counters so far, likewise (nullopt: the kernel keeps none).
  std::optional<SchedStat> SchedNow() const {
    if (finished.load(std::memory_order_acquire)) return exit_sched;
    auto s = ReadSchedStat(ThreadSchedStatPath(tid));
    if (!s && finished.load(std::memory_order_acquire)) return exit_sched;  // it just ended
    return s;
  }

  ThreadResult result;
  std::string open_error;
  std::string io_error;               // the first failed request of this thread
  std::atomic<uint64_t> measured{0};  // progress, read by the coordinator
  std::atomic<bool> finished{false};
  uint64_t last_measured_ns = 0;      // completion time of the last measured request
  int tid = 0;                        // its thread id (set before `opened`)
  std::optional<SchedStat> exit_sched;  // its schedstat when it finished (before `finished`)

 public:
  // The DepthDriver's source.
  bool Next(DriverSlot& s) {
    if (Stopping()) return false;
    if (shared_.exchange) Exchange();
    // --task-cpu: the task computes before it asks for its next page, checking its quantum.
    if (shared_.task_cpu) shared_.scheduler->Work(result.index, shared_.task_cpu->Draw(cpu_rng_));
    Prepare(s, shared_.phase.load(std::memory_order_acquire));
    return true;
  }
  void Submitting(std::span<IoRequest* const> batch) {
    const uint64_t now = NowNs();
    for (IoRequest* r : batch) static_cast<DriverSlot*>(r->user_data)->start_ns = now;
  }
  void Done(DriverSlot& s) { Finish(s); }
  // With a quantum scheduler (--cpu-ready) the thread runs only while it holds its scheduler:
  // it checks its quantum after each batch and gives the scheduler up while it waits for I/O.
  void Submitted() {
    if (shared_.scheduler) shared_.scheduler->Checkpoint(result.index);
  }
  void Waiting(bool begin) {
    if (!shared_.scheduler) return;
    if (begin) {
      shared_.scheduler->Suspend(result.index);
    } else {
      shared_.scheduler->Run(result.index);
    }
  }

 private:
  // --exchange: waits, off its scheduler, until every thread has finished its step (CXPACKET).
  void Exchange() {
    if (shared_.scheduler) shared_.scheduler->Suspend(result.index);
    shared_.exchange->ArriveAndWait();
    if (shared_.scheduler) shared_.scheduler->Run(result.index);
  }

  bool Stopping() const {
    if (failed_ || shared_.failed.load(std::memory_order_relaxed)) return true;
    const int phase = shared_.phase.load(std::memory_order_acquire);
    return phase == kStop || (shared_.count_mode && issued_ >= quota_);
  }

  void Prepare(DriverSlot& s, int phase) {
    IoRequest& r = s.req;
    s.measured = shared_.count_mode && phase == kMeasure;
    if (k_.flush_interval != 0 && writes_since_flush_ >= k_.flush_interval) {
      writes_since_flush_ = 0;
      r.op = Op::kFlush;
      r.offset = r.length = 0;
      r.iov = nullptr;
      r.iovcnt = 0;
      return;
    }
    const bool write = k_.write_pct != 0 && (k_.write_pct == 100 || rng_.Below(100) < k_.write_pct);
    r.op = write ? Op::kWrite : Op::kRead;
    r.offset = offsets_.Next(rng_);
    r.length = k_.block_size;
    r.iov = write ? &s.write_iov : &s.read_iov;
    r.iovcnt = 1;
    if (write) {
      content_.Stamp(static_cast<std::byte*>(s.write_iov.iov_base), k_.block_size, rng_);
      ++writes_since_flush_;
    }
    if (s.measured) ++issued_;
  }

  void Finish(DriverSlot& s) {
    const uint64_t now = NowNs();
    const IoRequest& r = s.req;
    const bool counted = shared_.count_mode
                             ? s.measured
                             : shared_.phase.load(std::memory_order_relaxed) == kMeasure;
    if (r.status && io_error.empty()) {
      io_error = std::string(OpName(r.op)) +
                 (r.op == Op::kFlush ? "" : " at offset " + std::to_string(r.offset)) + ": " +
                 r.status.message();
      failed_ = true;
      shared_.failed.store(true, std::memory_order_relaxed);
    }
    if (counted) {
      OpTotals& t = r.op == Op::kRead ? result.read : r.op == Op::kWrite ? result.write : result.flush;
      if (r.status) {
        ++t.errors;
      } else {
        ++t.ios;
        t.bytes += r.length;
        t.latency.Record(now - s.start_ns);
        if (r.op != Op::kFlush) {
          measured.store(measured.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        }
      }
      last_measured_ns = now;
    }
  }

  BlockDevice& device_;
  const WorkloadKnobs& k_;
  Shared& shared_;
  const uint64_t quota_;
  WorkloadRng rng_;
  OffsetGenerator offsets_;
  WriteContent content_;
  TimingRng cpu_rng_;  // --task-cpu draws
  uint64_t issued_ = 0;  // count mode: measured reads and writes issued
  uint64_t writes_since_flush_ = 0;
  bool failed_ = false;
};

// The driver stamps submission times through this optional hook: make sure it is found.
static_assert(requires(Worker& w, std::span<IoRequest* const> batch) { w.Submitting(batch); });

double Seconds(uint64_t ns) { return double(ns) * 1e-9; }

}  // namespace

Result<RunResult> RunWorkload(BlockDevice& device, const WorkloadKnobs& k,
                              const RunControl& control) {
  VSTACK_RETURN_IF_ERROR(CheckKnobsAgainstDevice(k, device));
  const uint64_t region = RegionBytes(k, device);
  // A round that writes starts from a flushed device: the fill's and earlier rounds' writes are
  // durable, and no cache is measured in a pre-flush mode (librbd acknowledges a write only
  // once the OSDs have it until the image's first flush, rbd_cache_writethrough_until_flush,
  // and early from then on). Outside the measured window, like the fill.
  if (k.write_pct > 0 && !device.read_only()) {
    if (const std::error_code ec = SyncIo(device).Flush()) {
      return MakeError(Errc::kIo, "cannot flush the stack before the round: " + ec.message());
    }
  }
  ScopedStackStatsMode latency(device, StatsMode::kLatency);  // per-layer time for attribution

  // Per-layer CPU (lib/cpu_account.h): the workload threads, and the layers' helper threads,
  // are sampled while `sampling` lives; it outlives the workers.
  Result<std::unique_ptr<CpuSampling>> sampling =
      k.sample_cpu ? CpuSampling::Start()
                   : Result<std::unique_ptr<CpuSampling>>(
                         MakeError(Errc::kCancelled, "per-layer CPU not sampled (--cpu-sampling off)"));
  Shared shared;
  shared.count_mode = k.io_count != 0;
  if (k.exchange) shared.exchange.emplace(k.threads);
  std::unique_ptr<QuantumScheduler> scheduler;
  if (k.quantum_ns != 0) {
    SchedulerOptions so;
    so.schedulers = k.schedulers;
    so.quantum_ns = k.quantum_ns;
    so.ready_fraction = k.cpu_ready_pct / 100;
    auto stall = ServiceTime::Parse("--ready-stall", k.ready_stall);
    if (!stall) return stall.error();
    so.stall = *stall;
    so.seed = k.seed;
    so.work_sleeps = k.task_cpu_sleeps;
    scheduler = std::make_unique<QuantumScheduler>(so, SystemClock());
    shared.scheduler = scheduler.get();
    if (!k.task_cpu.empty()) {
      auto cpu = ServiceTime::Parse("--task-cpu", k.task_cpu);
      if (!cpu) return cpu.error();
      shared.task_cpu = *cpu;
    }
  }
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < k.threads; ++i) {
    const uint64_t quota = k.io_count / k.threads + (i < k.io_count % k.threads ? 1 : 0);
    workers.push_back(std::make_unique<Worker>(device, k, i, region, quota, shared));
  }
  for (auto& w : workers) threads.emplace_back([&w] { w->Run(); });
  auto join = [&] {
    shared.go.store(true, std::memory_order_release);
    for (std::thread& t : threads) t.join();
  };
  while (shared.opened.load() < k.threads) std::this_thread::sleep_for(std::chrono::microseconds(200));
  for (auto& w : workers) {
    if (!w->open_error.empty()) {
      shared.phase.store(kStop);
      join();
      return MakeError(Errc::kIo, "cannot open a queue: " + w->open_error);
    }
  }

  RunResult result;
  result.knobs = k;
  result.region_bytes = region;
  std::vector<LayerStats> stats_before;
  CpuSnapshot cpu_before;
  uint64_t engine_before = 0;
  std::map<int, double> uring_before;
  // The host's CPU Ready: run-queue wait of the workload threads and the io_uring workers.
  auto add_workers_sched = [&](SchedSnapshot& s) {
    for (auto& w : workers) s.Add(w->tid, w->SchedNow(), /*required=*/true);
  };
  auto add_uring_sched = [](SchedSnapshot& s) {
    for (int tid : IoUringWorkerThreads()) {
      s.Add(tid, ReadSchedStat(ThreadSchedStatPath(tid)), /*required=*/false);
    }
  };
  SchedSnapshot sched_before;
  YieldStats yields_before;
  uint64_t window_start = 0;
  auto begin_window = [&] {
    if (scheduler) yields_before = scheduler->Snapshot(/*reset_max=*/true);
    stats_before = SnapshotStack(device);
    cpu_before = TakeCpuSnapshot();
    engine_before = shared.engine.ns.load(std::memory_order_relaxed);
    uring_before = IoUringWorkerCpu();
    sched_before = SchedSnapshot{};
    add_workers_sched(sched_before);
    add_uring_sched(sched_before);
    window_start = NowNs();
    shared.phase.store(kMeasure, std::memory_order_release);
  };
  auto measured_ios = [&] {
    uint64_t n = 0;
    for (auto& w : workers) n += w->measured.load(std::memory_order_relaxed);
    return n;
  };

  const uint64_t start = NowNs();
  const uint64_t warmup_ns = static_cast<uint64_t>(k.warmup_s * 1e9);
  const uint64_t duration_ns = static_cast<uint64_t>(k.duration_s * 1e9);
  if (warmup_ns == 0) begin_window();
  shared.go.store(true, std::memory_order_release);
  uint64_t next_progress = start + static_cast<uint64_t>(control.progress_interval_s * 1e9);
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const uint64_t now = NowNs();
    if (control.stop && control.stop->load(std::memory_order_relaxed)) {
      result.interrupted = true;
      break;
    }
    if (shared.failed.load()) break;
    const int phase = shared.phase.load();
    if (phase == kWarmup && now - start >= warmup_ns) begin_window();
    if (phase == kMeasure) {
      if (!shared.count_mode && now - window_start >= duration_ns) break;
      if (shared.count_mode &&
          std::all_of(workers.begin(), workers.end(), [](auto& w) { return w->finished.load(); })) {
        break;
      }
    }
    if (control.on_progress && now >= next_progress) {
      next_progress = now + static_cast<uint64_t>(control.progress_interval_s * 1e9);
      Progress p;
      p.elapsed_s = Seconds(now - start);
      p.total_s = shared.count_mode ? 0 : k.warmup_s + k.duration_s;
      p.warming_up = shared.phase.load() == kWarmup;
      p.ios = measured_ios();
      if (!p.warming_up && now > window_start) p.iops = double(p.ios) / Seconds(now - window_start);
      control.on_progress(p);
    }
  }
  if (shared.phase.load() == kWarmup) begin_window();  // stopped during warm-up: empty window

  // Close the window: a time-based window ends now; a count-based one at its last completion.
  const bool count_complete = shared.count_mode && !result.interrupted && !shared.failed.load();
  std::vector<LayerStats> stats_after;
  CpuSnapshot cpu_after;
  uint64_t window_end = 0;
  YieldStats yields_after;
  // Every worker has finished in a complete count-based window, so its ring's io_uring workers
  // are read now, before they go with the queues.
  uint64_t engine_after = 0;
  const std::map<int, double> uring_after = IoUringWorkerCpu();
  SchedSnapshot sched_after;
  add_uring_sched(sched_after);
  if (!count_complete) {
    if (scheduler) yields_after = scheduler->Snapshot();
    stats_after = SnapshotStack(device);
    cpu_after = TakeCpuSnapshot();
    engine_after = shared.engine.ns.load(std::memory_order_relaxed);
    add_workers_sched(sched_after);
    window_end = NowNs();
  }
  shared.phase.store(kStop, std::memory_order_release);
  join();
  if (count_complete) {
    if (scheduler) yields_after = scheduler->Snapshot();
    stats_after = SnapshotStack(device);
    cpu_after = TakeCpuSnapshot();
    engine_after = shared.engine.ns.load(std::memory_order_relaxed);
    add_workers_sched(sched_after);
    for (auto& w : workers) window_end = std::max(window_end, w->last_measured_ns);
    window_end = std::max(window_end, window_start);
  }

  result.seconds = Seconds(window_end - window_start);
  result.cpu = CpuBetween(cpu_before, cpu_after, result.seconds);
  result.cpu.uring_workers_s = IoUringWorkerCpuBetween(uring_before, uring_after);
  if (sampling) {
    result.cpu.sampled = true;
    result.cpu.engine_s = Seconds(engine_after - engine_before);
  } else {
    result.cpu.sampling_error = sampling.error().ToString();
  }
  result.host_ready = HostReadyBetween(sched_before, sched_after, result.seconds);
  if (double load[1]; getloadavg(load, 1) == 1) result.cpu.load_average = load[0];
  result.layers = StackDelta(device, stats_before, stats_after);
  if (scheduler) result.yields = YieldStats::Between(yields_before, yields_after);
  for (auto& w : workers) {
    result.threads.push_back(std::move(w->result));
    if (result.error.empty() && !w->io_error.empty()) result.error = w->io_error;
  }
  return result;
}

}  // namespace vstack::bench
