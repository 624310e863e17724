// The emulation layers (delay:, error:, hv:, ready:) and the workload's quantum scheduler, on a
// ManualClock: semantics on synthetic time, no wall-clock thresholds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <thread>

#include "bench/workload/quantum_scheduler.h"
#include "bench/workload/presets.h"
#include "blockdev/delay/delay_device.h"
#include "blockdev/emulation/stall_schedule.h"
#include "blockdev/error/error_device.h"
#include "blockdev/hv/hv_device.h"
#include "blockdev/ready/ready_device.h"
#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"

namespace vstack {
namespace {

using testing::IsOk;

DevicePtr Memory() { return Open("memory:4M").value(); }

// Requests of one queue whose callbacks record the clock at completion.
struct Timed {
  explicit Timed(Clock& clock, size_t n, uint32_t bs = 4096) : clock(clock), buf(n * bs, 4096) {
    reqs.resize(n);
    done_at.assign(n, 0);
    iovs.resize(n);
    for (size_t i = 0; i < n; ++i) {
      iovs[i] = {buf.data() + i * bs, bs};
      reqs[i].op = Op::kRead;
      reqs[i].offset = i * bs;
      reqs[i].length = bs;
      reqs[i].iov = &iovs[i];
      reqs[i].iovcnt = 1;
      reqs[i].user_data = this;
      reqs[i].on_complete = [](IoRequest& r) {
        Timed* t = static_cast<Timed*>(r.user_data);
        t->done_at[&r - t->reqs.data()] = t->clock.Now();
      };
    }
  }
  std::vector<IoRequest*> Ptrs() {
    std::vector<IoRequest*> p;
    for (IoRequest& r : reqs) p.push_back(&r);
    return p;
  }
  Clock& clock;
  AlignedBuffer buf;
  std::vector<IoRequest> reqs;
  std::vector<iovec> iovs;
  std::vector<uint64_t> done_at;
};

uint64_t Counter(const BlockDevice& d, const std::string& name) {
  const LayerStats s = d.Stats();
  for (size_t i = 0; i < s.counter_names.size(); ++i) {
    if (s.counter_names[i] == name) return s.counters[i];
  }
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

TEST(Delay, ServesAtMostQdAtATimeAndSleepsInsteadOfSpinning) {
  ManualClock clock;
  DelayConfig c;
  c.read = c.write = ServiceTime::Fixed(1'000'000);
  c.queue.max_in_service = 2;
  DevicePtr dev = MakeDevice<DelayDevice>(Memory(), c, clock);
  auto q = dev->OpenQueue();
  ASSERT_TRUE(q);
  const uint64_t t0 = clock.Now();
  Timed t(clock, 5);
  (*q)->Submit(t.Ptrs());
  EXPECT_EQ((*q)->Poll(0), 0u) << "nothing is due yet";
  (*q)->WaitIdle();
  // Two at a time: 1 ms, 1 ms, 2 ms, 2 ms, 3 ms.
  EXPECT_EQ(t.done_at, (std::vector<uint64_t>{t0 + 1'000'000, t0 + 1'000'000, t0 + 2'000'000,
                                              t0 + 2'000'000, t0 + 3'000'000}));
  EXPECT_EQ(Counter(*dev, "waited_for_slot"), 3u);
  EXPECT_EQ(Counter(*dev, "service_ns"), 5'000'000u);
  EXPECT_EQ(Counter(*dev, "late_ns"), 0u);
  EXPECT_EQ(clock.spun_ns(), 0u);
  EXPECT_GE(clock.sleeps(), 3u);
  EXPECT_LE(clock.sleeps(), 5u) << "one sleep per deadline, no polling loop";
}

TEST(Delay, WithoutALimitEveryRequestTakesItsOwnServiceTime) {
  ManualClock clock;
  DelayConfig c;
  c.read = ServiceTime::Fixed(500'000);
  DevicePtr dev = MakeDevice<DelayDevice>(Memory(), c, clock);
  auto q = dev->OpenQueue();
  const uint64_t t0 = clock.Now();
  Timed t(clock, 32);
  (*q)->Submit(t.Ptrs());
  (*q)->WaitIdle();
  for (uint64_t at : t.done_at) EXPECT_EQ(at, t0 + 500'000);
}

// The mean of many QD1 requests on synthetic time: the distribution's mean, within sampling
// error (deterministic: fixed seed).
double MeanLatencyNs(const std::string& read, int n) {
  ManualClock clock;
  DelayConfig c;
  c.read = ServiceTime::Parse("read", read).value();
  c.seed = 42;
  DevicePtr dev = MakeDevice<DelayDevice>(Memory(), c, clock);
  auto q = dev->OpenQueue();
  Timed t(clock, 1);
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t start = clock.Now();
    (*q)->Submit(t.reqs[0]);
    (*q)->WaitIdle();
    sum += double(t.done_at[0] - start);
  }
  return sum / n;
}

TEST(Delay, DistributionMeansAreTheConfiguredOnes) {
  EXPECT_DOUBLE_EQ(MeanLatencyNs("5.4066ms", 100), 5'406'600);
  EXPECT_NEAR(MeanLatencyNs("uniform:1ms:3ms", 20000), 2'000'000, 0.01 * 2'000'000);
  EXPECT_NEAR(MeanLatencyNs("lognormal:1ms:500us", 20000), 1'000'000, 0.015 * 1'000'000);
  EXPECT_NEAR(MeanLatencyNs("exp:80us", 20000), 80'000, 0.02 * 80'000);
}

// A percentile table draws its points' values at their percentiles, log-linearly in between,
// and its mean is the integral of that.
TEST(ServiceTime, PercentileTableDrawsItsPercentilesAndItsMean) {
  auto t = ServiceTime::Parse("read", "pct:0=1ms/50=6ms/90=27ms/100=200ms");
  ASSERT_TRUE(t) << t.error().message;
  TimingRng rng(3);
  std::vector<uint64_t> v;
  double sum = 0;
  for (int i = 0; i < 200'000; ++i) {
    v.push_back(t->Draw(rng));
    sum += double(v.back());
  }
  std::sort(v.begin(), v.end());
  EXPECT_NEAR(double(v[100'000]), 6e6, 0.02 * 6e6);
  EXPECT_NEAR(double(v[180'000]), 27e6, 0.02 * 27e6);
  EXPECT_GE(v.front(), 1'000'000u);
  EXPECT_LE(v.back(), 200'000'000u);
  // 0-50: (6 - 1) / ln 6, 50-90: 21 / ln 4.5, 90-100: 173 / ln(200 / 27), in ms.
  const double mean = (0.5 * 5 / std::log(6.0) + 0.4 * 21 / std::log(4.5) +
                       0.1 * 173 / std::log(200.0 / 27)) * 1e6;
  EXPECT_NEAR(t->mean_ns(), mean, 1);
  EXPECT_NEAR(sum / double(v.size()), mean, 0.01 * mean);
  EXPECT_EQ(ServiceTime::Parse("read", t->ToString())->ToString(), t->ToString());
  for (const char* bad : {"pct:50=6ms/100=9ms", "pct:0=1ms/50=6ms", "pct:0=1ms/60=6ms/50=9ms",
                          "pct:0=1ms/50=6ms/100=2ms", "pct:0=0/100=1ms", "pct:0=1ms/x/100=2ms"}) {
    auto r = ServiceTime::Parse("delay: read", bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("pct:P=DURATION"), std::string::npos) << r.error().message;
  }
}

// Stalls stop the device for every queue: a request due inside a stall completes at its end,
// one due outside is untouched, and the schedule repeats every period.
TEST(Delay, RequestsDueDuringAStallCompleteWhenItEnds) {
  ManualClock clock;
  DelayConfig c;
  c.read = ServiceTime::Fixed(1'000'000);
  // Period 10 s, stalls 2 s and 1 s: gap (10 - 3) / 2 = 3.5 s, so the stalls are [1.75, 3.75)
  // and [7.25, 8.25) s after the device opened.
  c.stalls = {2'000'000'000, 1'000'000'000};
  c.stall_period_ns = 10'000'000'000;
  const uint64_t t0 = clock.Now();
  DevicePtr dev = MakeDevice<DelayDevice>(Memory(), c, clock);
  auto a = dev->OpenQueue();
  auto b = dev->OpenQueue();
  Timed ta(clock, 1), tb(clock, 1);
  auto at = [&](uint64_t ns) { clock.Advance(t0 + ns - clock.Now()); };
  at(1'000'000'000);  // due at 1.001 s: before the first stall
  (*a)->Submit(ta.reqs[0]);
  (*a)->WaitIdle();
  EXPECT_EQ(ta.done_at[0], t0 + 1'001'000'000);
  at(2'000'000'000);  // due inside [1.75, 3.75): both queues wait for its end
  (*a)->Submit(ta.reqs[0]);
  (*b)->Submit(tb.reqs[0]);
  (*a)->WaitIdle();
  (*b)->WaitIdle();
  EXPECT_EQ(ta.done_at[0], t0 + 3'750'000'000);
  EXPECT_EQ(tb.done_at[0], t0 + 3'750'000'000);
  at(17'500'000'000);  // the second period's second stall, [17.25, 18.25)
  (*a)->Submit(ta.reqs[0]);
  (*a)->WaitIdle();
  EXPECT_EQ(ta.done_at[0], t0 + 18'250'000'000);
  EXPECT_EQ(Counter(*dev, "stalled"), 3u);
  EXPECT_EQ(Counter(*dev, "stall_ns"), 2 * 1'749'000'000u + 749'000'000u);
  EXPECT_TRUE(Open("delay:latency=pct:0=1ms/100=9ms,stalls=2s/500ms,stall_period=60s+null:1M"));
  EXPECT_FALSE(Open("delay:latency=1ms,stalls=2s+null:1M")) << "stalls need a period";
  EXPECT_FALSE(Open("delay:latency=1ms,stalls=40s/30s,stall_period=60s+null:1M"));
  EXPECT_FALSE(Open("delay:latency=1ms,stall_period=60s+null:1M"));
  EXPECT_FALSE(Open("delay:latency=1ms,stalls=2s/0,stall_period=60s+null:1M"));
}

// A clock whose sleeps wake up late, as a loaded host's scheduler makes them: by a draw from
// `lateness` (deterministic). Spins take exactly their time.
// `per_sleep_ns` adds that share of the sleep's length (a loaded host's lateness grows with it).
class LateWakeClock final : public Clock {
 public:
  explicit LateWakeClock(const std::string& lateness, double per_sleep_ns = 0)
      : lateness_(ServiceTime::Parse("lateness", lateness).value()), per_sleep_(per_sleep_ns) {}
  uint64_t Now() override { return now_; }
  void SleepUntil(uint64_t deadline_ns) override {
    const double slept = deadline_ns > now_ ? double(deadline_ns - now_) : 0;
    now_ = std::max(now_, deadline_ns) + lateness_.Draw(rng_) +
           static_cast<uint64_t>(per_sleep_ * slept);
  }
  void Spin(uint64_t ns) override {
    now_ += ns;
    spun_ns += ns;
  }
  uint64_t spun_ns = 0;

 private:
  ServiceTime lateness_;
  double per_sleep_;
  TimingRng rng_{7};
  uint64_t now_ = 1'000'000'000;
};

// The mean latency the caller observes over `n` requests of a `delay` device kept `qd` deep,
// after a warm-up of n / 10 (the compensation learns the host's lateness, as in vstack bench's
// warm-up).
double ObservedMeanNs(Clock& clock, const std::string& delay, size_t qd, int n) {
  DelayConfig c;
  c.read = ServiceTime::Parse("read", delay).value();
  DevicePtr dev = MakeDevice<DelayDevice>(Memory(), c, clock);
  auto q = dev->OpenQueue();
  Timed t(clock, qd);
  std::vector<uint64_t> started(qd, clock.Now());
  (*q)->Submit(t.Ptrs());
  double sum = 0;
  int done = 0;
  const int warmup = n / 10;
  while (done < warmup + n) {
    (*q)->Poll(1);
    for (size_t i = 0; i < qd; ++i) {
      if (t.done_at[i] == 0) continue;
      if (++done > warmup) sum += double(t.done_at[i] - started[i]);
      t.done_at[i] = 0;
      started[i] = clock.Now();
      (*q)->Submit(t.reqs[i]);
    }
  }
  (*q)->WaitIdle();
  return sum / (done - warmup);
}

TEST(Delay, ObservedMeanIsTheConfiguredDelayAlthoughSleepsWakeLate) {
  for (const char* delay : {"50us", "1ms", "10ms"}) {
    for (size_t qd : {1, 32}) {
      // Every sleep wakes 100-700 us late (mean 400 us: 8x a 50 us delay, 4% of 10 ms).
      LateWakeClock clock("uniform:100us:700us");
      const uint64_t t0 = clock.Now();
      const double configured = double(ParseDurationNs(delay).value());
      EXPECT_NEAR(ObservedMeanNs(clock, delay, qd, 4000), configured, 0.02 * configured)
          << delay << " at QD" << qd;
      if (configured >= 1e6) {
        EXPECT_LT(double(clock.spun_ns), 0.02 * double(clock.Now() - t0))
            << "sleeps, spinning only the last stretch: " << delay << " at QD" << qd;
      }
    }
  }
}

TEST(Delay, ReadAndWriteMeansHoldWhenLatenessGrowsWithTheSleep) {
  // The physical LUN of the hyperv-passthrough seed; sleeps wake 20-100 us + 10% late, so a
  // read is late by ~600 us and a write by ~85 us: each kind needs its own correction.
  LateWakeClock clock("uniform:20us:100us", 0.1);
  DelayConfig c;
  c.read = ServiceTime::Fixed(5'406'600);
  c.write = ServiceTime::Fixed(254'400);
  DevicePtr dev = MakeDevice<DelayDevice>(Memory(), c, clock);
  auto q = dev->OpenQueue();
  Timed t(clock, 1);
  double sum[2] = {0, 0}, n[2] = {0, 0};
  for (int i = 0; i < 4400; ++i) {
    t.reqs[0].op = i % 3 == 2 ? Op::kWrite : Op::kRead;  // 66/33
    const uint64_t start = clock.Now();
    (*q)->Submit(t.reqs[0]);
    (*q)->WaitIdle();
    if (i < 400) continue;  // warm-up
    sum[t.reqs[0].op == Op::kWrite] += double(t.done_at[0] - start);
    ++n[t.reqs[0].op == Op::kWrite];
  }
  EXPECT_NEAR(sum[0] / n[0], 5'406'600, 0.02 * 5'406'600);
  EXPECT_NEAR(sum[1] / n[1], 254'400, 0.02 * 254'400);
}

TEST(Delay, BandwidthCapSerialisesTransfers) {
  ManualClock clock;
  DelayConfig c;
  c.queue.bytes_per_s = 4096 * 1000;  // 1 ms per 4 KiB
  DevicePtr dev = MakeDevice<DelayDevice>(Memory(), c, clock);
  auto q = dev->OpenQueue();
  const uint64_t t0 = clock.Now();
  Timed t(clock, 3);
  (*q)->Submit(t.Ptrs());
  (*q)->WaitIdle();
  EXPECT_EQ(t.done_at, (std::vector<uint64_t>{t0 + 1'000'000, t0 + 2'000'000, t0 + 3'000'000}));
}

TEST(Delay, BadOptionsAreRefusedWithTheirName) {
  auto r = Open("delay:read=5+null:1M");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("delay: read"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("5ms"), std::string::npos) << r.error().message;
  EXPECT_FALSE(Open("delay:read=uniform:3ms:1ms+null:1M"));
  EXPECT_FALSE(Open("delay:read=gauss:3ms+null:1M"));
  EXPECT_TRUE(Open("delay:read=lognormal:5ms:2ms,write=250us,qd=1,bw=100M+null:1M"));
}

TEST(Error, FailsExactlyTheRequestsItWasToldTo) {
  ErrorConfig c;
  c.ops = 1u << static_cast<int>(Op::kWrite);
  c.error = ENOSPC;
  c.after = 3;
  c.count = 2;
  DevicePtr dev = MakeDevice<ErrorDevice>(Memory(), c);
  SyncIo io(*dev);
  std::vector<std::byte> buf(4096);
  std::vector<int> failed;
  for (int i = 1; i <= 8; ++i) {
    EXPECT_TRUE(IsOk(io.Read(0, buf))) << "reads never match";
    const std::error_code ec = io.Write(4096 * i, buf);
    if (ec) {
      EXPECT_EQ(ec.value(), ENOSPC);
      failed.push_back(i);
    }
  }
  EXPECT_EQ(failed, (std::vector<int>{4, 5}));
  EXPECT_TRUE(IsOk(io.Flush()));
}

TEST(Error, OffsetRangeAndSeededRateAreDeterministic) {
  auto failures = [](const std::string& spec) {
    DevicePtr dev = Open(spec).value();
    SyncIo io(*dev);
    std::vector<std::byte> buf(4096);
    std::vector<int> out;
    for (int i = 0; i < 400; ++i) {
      if (io.Read(uint64_t(i % 64) * 4096, buf)) out.push_back(i);
    }
    return out;
  };
  const auto a = failures("error:ops=read,rate=0.25,seed=7+memory:1M");
  EXPECT_EQ(a, failures("error:ops=read,rate=0.25,seed=7+memory:1M"));
  EXPECT_NE(a, failures("error:ops=read,rate=0.25,seed=8+memory:1M"));
  EXPECT_GT(a.size(), 60u);
  EXPECT_LT(a.size(), 140u);
  // Only blocks 8..9 (offset 32K, length 8K): i % 64 in {8, 9}.
  const auto b = failures("error:ops=read,offset=32K,length=8K+memory:1M");
  ASSERT_FALSE(b.empty());
  for (int i : b) EXPECT_TRUE(i % 64 == 8 || i % 64 == 9) << i;
  EXPECT_EQ(b.size(), 2u * 400 / 64 + (400 % 64 > 8) + (400 % 64 > 9));
}

// A bad value names the option, the value and what it takes, as other layers' errors do
// ("error: option 'ops': ..."); `ops=all/read` said "'all' is not one of read, write, zero,
// flush, trim, all", and an empty kind "'' is not one of ...".
TEST(Error, BadOptionsAreRefused) {
  const std::string kinds = "read, write, zero, flush, trim joined with '/' (read/write), or all";
  const std::pair<const char*, std::string> cases[] = {
      {"ops=reed", "option 'ops': 'reed' is not one of " + kinds + "; did you mean `read`?"},
      {"ops=read/discard", "option 'ops': 'discard' in 'read/discard' is not one of " + kinds},
      {"ops=all/read", "option 'ops': 'all/read': all (every kind) stands alone"},
      {"ops=read/all", "option 'ops': 'read/all': all (every kind) stands alone"},
      {"ops=read//write", "option 'ops': 'read//write' has an empty kind; give " + kinds},
      {"ops=read/", "option 'ops': 'read/' has an empty kind"},
      {"ops=", "option 'ops': an empty value is not one of " + kinds},
      {"errno=EFOO", "option 'errno': 'EFOO' is not an errno number from 1 to 4095 or one of EIO"},
      {"rate=2", "option 'rate': '2' is not a probability from 0 to 1"},
  };
  for (const auto& [option, message] : cases) {
    auto r = Open(std::string("error:") + option + "+null:1M");
    ASSERT_FALSE(r) << option;
    EXPECT_EQ(r.error().code, make_error_code(Errc::kBadSpec)) << option;
    EXPECT_EQ(r.error().message.rfind("error: " + message, 0), 0u) << r.error().message;
  }
  EXPECT_TRUE(Open("error:ops=read/write/flush,errno=EIO+null:1M"));
  EXPECT_TRUE(Open("error:ops=all+null:1M"));
}

// A bad option value of an emulation layer is a usage error (Errc::kBadSpec: exit 2, with the
// usage hint), as every other layer's is; they were Errc::kInvalidArgument (exit 1). An error
// in the latency names latency=, not read= (which the user did not write).
TEST(EmulationOptions, BadValuesAreUsageErrorsNamingTheOptionWritten) {
  for (const char* spec :
       {"delay:latency=-5ms+null:1M", "delay:latency=uniform:5ms:1ms+null:1M",
        "delay:stalls=1s+null:1M", "delay:stall_period=1s+null:1M", "error:rate=2+null:1M",
        "error:errno=EFOO+null:1M", "error:errno=99999+null:1M", "error:ops=discard+null:1M",
        "ready:pct=100+null:1M", "ready:quantum=-1ms+null:1M", "hv:cpu=-1us+null:1M",
        "hv:preset=foo+null:1M", "ready:pct=50,stall=0,quantum=0+null:1M",
        "ready:pct=5,stall=uniform:0:0+null:1M", "error:offset=1M+null:1M",
        "error:offset=2M,length=4K+null:1M",
        "error:offset=4K,length=18446744073709551615+null:1M"}) {
    auto r = Open(spec);
    ASSERT_FALSE(r) << spec;
    EXPECT_EQ(r.error().code, make_error_code(Errc::kBadSpec)) << spec << ": " << r.error().message;
  }
  auto r = Open("delay:latency=-5ms+null:1M");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("delay: latency: '-5ms'"), std::string::npos) << r.error().message;
  r = Open("error:errno=99999+null:1M");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("from 1 to 4095"), std::string::npos) << r.error().message;
  r = Open("error:offset=2M+null:1M");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("offset=2M is not inside the device below (1048576 bytes)"),
            std::string::npos)
      << r.error().message;
  EXPECT_TRUE(Open("error:offset=1020K,length=1G+null:1M")) << "a range that starts inside";
  EXPECT_TRUE(Open("ready:pct=0,stall=0+null:1M")) << "nothing asked, nothing injected";
  r = Open("delay:latency=9223372036s+null:1M");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("is too long"), std::string::npos) << r.error().message;
  testing::CommandResult c = testing::RunVstack("info 'hv:preset=foo+null:1M'");
  EXPECT_EQ(c.status, 2) << c.output;
  EXPECT_NE(c.output.find("Try `vstack help info`"), std::string::npos) << c.output;
}

TEST(Hv, AddsLatencyPerOpAndBurnsCpuOnTheSubmittingThread) {
  ManualClock clock;
  HvConfig c;
  c.read = ServiceTime::Fixed(373'100);
  c.write = ServiceTime::Fixed(117'200);
  c.cpu = ServiceTime::Fixed(10'000);
  DevicePtr dev = MakeDevice<HvDevice>(Memory(), c, clock);
  auto q = dev->OpenQueue();
  Timed t(clock, 2);
  t.reqs[1].op = Op::kWrite;
  uint64_t start = clock.Now();
  (*q)->Submit(t.Ptrs());
  (*q)->WaitIdle();
  // Each request's CPU is burned as it is accepted (10 us each); the batch then goes down, and
  // each request's latency runs from its lower completion.
  EXPECT_EQ(t.done_at[0], start + 20'000 + 373'100);
  EXPECT_EQ(t.done_at[1], start + 20'000 + 117'200);
  EXPECT_EQ(clock.spun_ns(), 20'000u);
  EXPECT_EQ(Counter(*dev, "cpu_ns"), 20'000u);
  EXPECT_EQ(Counter(*dev, "held_cpu_ns"), 0u) << "burned, not held";
  EXPECT_TRUE(Open("hv:preset=hyperv-passthrough+null:1M"));
  auto bad = Open("hv:preset=vmware+null:1M");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("hyperv-passthrough"), std::string::npos);
}

TEST(Hv, LatencyAddsToTheLowerDevicesTime) {
  ManualClock clock;
  DelayConfig d;
  d.read = ServiceTime::Fixed(5'406'600);
  HvConfig c;
  c.read = ServiceTime::Fixed(363'100);
  DevicePtr dev = MakeDevice<HvDevice>(MakeDevice<DelayDevice>(Memory(), d, clock), c, clock);
  auto q = dev->OpenQueue();
  Timed t(clock, 1);
  const uint64_t start = clock.Now();
  (*q)->Submit(t.reqs[0]);
  (*q)->WaitIdle();
  EXPECT_EQ(t.done_at[0], start + 5'406'600 + 363'100) << "not the slower of the two";
}

// With vcpus the CPU is held, not burned: the thread sleeps while its request holds the vCPU
// that is free first, and requests wait for one when all are busy (FIFO), so N vCPUs serve at
// most N / cpu requests per second.
TEST(Hv, VcpusHoldTheCpuAsleepAndQueueForAFreeOne) {
  ManualClock clock;
  HvConfig c;
  c.cpu = ServiceTime::Fixed(100'000);
  c.vcpus = 2;
  DevicePtr owner = MakeDevice<HvDevice>(Memory(), c, clock);
  HvDevice* dev = static_cast<HvDevice*>(owner.get());
  const uint64_t t0 = clock.Now();
  EXPECT_EQ(dev->ReserveVcpu(t0, 100'000), std::make_pair(0u, t0 + 100'000));
  EXPECT_EQ(dev->ReserveVcpu(t0, 100'000), std::make_pair(1u, t0 + 100'000));
  EXPECT_EQ(dev->ReserveVcpu(t0, 100'000), std::make_pair(0u, t0 + 200'000)) << "waits for vCPU 0";
  EXPECT_EQ(dev->ReserveVcpu(t0 + 150'000, 100'000), std::make_pair(1u, t0 + 250'000));
  EXPECT_EQ(dev->ReserveVcpu(t0 + 900'000, 50'000), std::make_pair(0u, t0 + 950'000)) << "idle";

  DevicePtr held = MakeDevice<HvDevice>(Memory(), c, clock);
  auto q = held->OpenQueue();
  Timed t(clock, 3);
  const uint64_t start = clock.Now();
  (*q)->Submit(t.Ptrs());
  (*q)->WaitIdle();
  // One thread: it sleeps through each request's CPU in turn, on alternating vCPUs.
  EXPECT_EQ(t.done_at[2], start + 300'000);
  EXPECT_EQ(clock.spun_ns(), 0u) << "nothing burned";
  EXPECT_EQ(Counter(*held, "cpu_ns"), 300'000u);
  EXPECT_EQ(Counter(*held, "vcpu0_ns") + Counter(*held, "vcpu1_ns"), 300'000u);
  EXPECT_EQ(Counter(*held, "held_cpu_ns"), 300'000u);
  EXPECT_TRUE(Open("hv:cpu=275us,vcpus=2+null:1M"));
  EXPECT_FALSE(Open("hv:cpu=275us,vcpus=65+null:1M"));
}

TEST(StallSchedule, StalledTimeIsTheConfiguredFractionOfWallTime) {
  for (double fraction : {0.012, 0.051, 0.284}) {
    ManualClock clock;
    StallSchedule s(fraction, ServiceTime::Parse("stall", "exp:4ms").value(), 1'000'000, 3,
                    clock.Now());
    const uint64_t t0 = clock.Now();
    uint64_t injected = 0;
    while (clock.Now() - t0 < 100'000'000'000ull) {  // 100 s of synthetic time in 50 us steps
      clock.Advance(50'000);
      const uint64_t stall = s.Due(clock.Now());
      clock.Advance(stall);
      injected += stall;
    }
    EXPECT_EQ(injected, s.stalled_ns());
    EXPECT_NEAR(double(injected) / double(clock.Now() - t0), fraction, 0.002) << fraction;
    EXPECT_EQ(s.max_stall_ns() % 1'000'000, 0u) << "whole quanta";
  }
}

TEST(Ready, StallsTheQueueAndCountsWhatItInjected) {
  ManualClock clock;
  ReadyConfig c;
  c.fraction = 0.2;
  c.stall = ServiceTime::Fixed(2'000'000);
  c.quantum_ns = 0;
  DevicePtr dev = MakeDevice<ReadyDevice>(Memory(), c, clock);
  auto q = dev->OpenQueue();
  const uint64_t t0 = clock.Now();
  Timed t(clock, 1);
  for (int i = 0; i < 20000; ++i) {
    clock.Advance(100'000);  // the thread works 100 us between requests
    (*q)->Submit(t.reqs[0]);
    (*q)->WaitIdle();
  }
  const uint64_t stalled = Counter(*dev, "stalled_ns");
  EXPECT_EQ(stalled, Counter(*dev, "stalls") * 2'000'000);
  EXPECT_NEAR(double(stalled) / double(clock.Now() - t0), 0.2, 0.002);
}

TEST(QuantumScheduler, YieldsWhenTheWallClockQuantumIsUsedUp) {
  ManualClock clock;
  bench::SchedulerOptions o;
  o.quantum_ns = 4'000'000;
  bench::QuantumScheduler s(o, clock);
  s.Run(0);
  int yields = 0;
  for (int i = 0; i < 1000; ++i) {  // 100 ms of work in 100 us steps: 25 quanta
    clock.Advance(100'000);
    yields += s.Checkpoint(0);
  }
  s.Suspend(0);
  EXPECT_EQ(yields, 25);
  EXPECT_EQ(s.Snapshot().yields, 25u);
  EXPECT_EQ(s.Snapshot().wait_ns, 0u) << "nobody else to wait for";
}

TEST(QuantumScheduler, CpuReadyStallsEndQuantaEarlyAndAreCounted) {
  ManualClock clock;
  bench::SchedulerOptions o;
  o.quantum_ns = 4'000'000;
  o.ready_fraction = 0.25;
  o.stall = ServiceTime::Fixed(3'000'000);
  o.stall_quantum_ns = 0;
  bench::QuantumScheduler s(o, clock);
  const uint64_t t0 = clock.Now();
  s.Run(0);
  for (int i = 0; i < 100000; ++i) {
    clock.Advance(100'000);
    s.Checkpoint(0);
  }
  s.Suspend(0);
  const bench::YieldStats st = s.Snapshot();
  EXPECT_NEAR(double(st.stalled_ns) / double(clock.Now() - t0), 0.25, 0.002);
  // 10 s of work alone would be 2500 yields; every stall (3 ms of a 4 ms quantum) ends a
  // quantum early as well.
  EXPECT_GT(st.yields, 2500u + st.stalls / 2);
  EXPECT_EQ(st.max_stall_ns, 3'000'000u);
}

TEST(QuantumScheduler, WorkEndsQuantaByItselfAtRdyZero) {
  ManualClock clock;
  bench::SchedulerOptions o;
  o.quantum_ns = 4'000'000;
  bench::QuantumScheduler s(o, clock);
  s.Run(0);
  // 10 ms of CPU in one stretch, checked every 100 us: its quantum ends at 4 and 8 ms.
  EXPECT_EQ(s.Work(0, 10'000'000), 2u) << "one check at the end would see one quantum";
  EXPECT_EQ(clock.spun_ns(), 10'000'000u) << "work is CPU (Spin), not a sleep";
  EXPECT_EQ(s.Work(0, 1'000'000), 0u) << "3 ms into the third quantum";
  s.Suspend(0);
  const bench::YieldStats st = s.Snapshot();
  EXPECT_EQ(st.yields, 2u);
  EXPECT_EQ(st.stalls, 0u);
}

// A ManualClock whose sleeps end `late_ns` past their deadline, as a real timer's do.
class LateClock final : public Clock {
 public:
  explicit LateClock(uint64_t late_ns) : late_ns_(late_ns) {}
  uint64_t Now() override { return inner_.Now(); }
  void SleepUntil(uint64_t deadline_ns) override { inner_.SleepUntil(deadline_ns + late_ns_); }
  void Spin(uint64_t ns) override { inner_.Spin(ns); }
  uint64_t spun_ns() const { return inner_.spun_ns(); }

 private:
  ManualClock inner_;
  uint64_t late_ns_;
};

// --task-cpu-mode sleep: the work holds the scheduler asleep, with the same checkpoints, and a
// late wake-up is made up by the next step instead of piling up over the 100 steps.
TEST(QuantumScheduler, SleepingWorkEndsQuantaLikeBurnedWorkAndDoesNotDrift) {
  LateClock clock(30'000);
  bench::SchedulerOptions o;
  o.quantum_ns = 4'000'000;
  o.work_sleeps = true;
  bench::QuantumScheduler s(o, clock);
  s.Run(0);
  const uint64_t t0 = clock.Now();
  EXPECT_EQ(s.Work(0, 10'000'000), 2u) << "its quantum ends at 4 and 8 ms, as with Spin";
  EXPECT_EQ(clock.spun_ns(), 0u) << "no CPU burned";
  EXPECT_EQ(clock.Now() - t0, 10'030'000u) << "one wake-up late in all, not 100";
  s.Suspend(0);
}

// The stall of the running task is spent holding the scheduler: a yielder queued behind it
// waits through all of it (SOS_SCHEDULER_YIELD's wait contains the CPU Ready).
TEST(QuantumScheduler, QueuedYielderWaitsThroughAStallThatLandsWhileItIsQueued) {
  ManualClock clock;
  bench::SchedulerOptions o;
  o.quantum_ns = 4'000'000;
  o.ready_fraction = 0.5;
  o.stall = ServiceTime::Fixed(6'000'000);  // the first stall: from +6 ms to +12 ms
  o.stall_quantum_ns = 0;
  bench::QuantumScheduler s(o, clock);
  s.Run(0);
  std::thread b([&] {
    s.Run(1);              // queued behind task 0; runs from +4 ms
    s.Work(1, 3'000'000);  // stalled at +6 ms, yields at +12 ms, then ends its work
    s.Suspend(1);
  });
  while (s.RunnableTasks(0) != 1) std::this_thread::yield();
  // Task 0 uses its quantum up (+4 ms) and yields behind task 1, which is stalled meanwhile.
  EXPECT_EQ(s.Work(0, 4'000'000), 1u);
  s.Suspend(0);
  b.join();
  const bench::YieldStats st = s.Snapshot();
  EXPECT_EQ(st.stalls, 1u);
  EXPECT_EQ(st.stalled_ns, 6'000'000u);
  EXPECT_EQ(st.yields, 2u) << "task 0 at its quantum's end, task 1 after the stall";
  EXPECT_EQ(st.max_wait_ns, 8'000'000u) << "task 0 waited task 1's 2 ms of work and the 6 ms stall";
  EXPECT_EQ(st.wait_ns, 8'000'000u) << "task 1 ran again at once: task 0 suspended";
  EXPECT_EQ(st.signal_wait_ns, st.wait_ns);
}

// A task that works exp:700us of CPU between 1 ms I/O waits: its long stretches end quanta by
// themselves (the base), stalls that end a quantum early add to the base, and the stalled
// time is the configured fraction of wall time although the scheduler is idle between steps.
TEST(QuantumScheduler, StallsAddYieldsToTheBaseAndSumToTheConfiguredFraction) {
  const ServiceTime work = ServiceTime::Parse("work", "exp:700us").value();
  auto run = [&](double fraction, uint64_t* spun, uint64_t* elapsed) {
    ManualClock clock;
    bench::SchedulerOptions o;
    o.quantum_ns = 4'000'000;
    o.ready_fraction = fraction;
    o.stall = ServiceTime::Parse("stall", "exp:13.6ms").value();
    bench::QuantumScheduler s(o, clock);
    TimingRng rng(7);
    const uint64_t t0 = clock.Now();
    for (int i = 0; i < 20000; ++i) {
      s.Run(0);
      s.Work(0, work.Draw(rng));
      s.Suspend(0);
      clock.Advance(1'000'000);
    }
    *spun = clock.spun_ns();
    *elapsed = clock.Now() - t0;
    return s.Snapshot();
  };
  uint64_t base_spun = 0, base_elapsed = 0;
  const bench::YieldStats base = run(0, &base_spun, &base_elapsed);
  EXPECT_GT(base.yields, 20u) << "exp:700us runs over 4 ms in 0.3% of the steps";
  uint64_t previous = base.yields;
  for (double fraction : {0.012, 0.051, 0.284}) {
    uint64_t spun = 0, elapsed = 0;
    const bench::YieldStats st = run(fraction, &spun, &elapsed);
    EXPECT_EQ(spun, base_spun) << "the same work; stalls are not CPU";
    EXPECT_NEAR(double(st.stalled_ns) / double(elapsed), fraction, 0.003) << fraction;
    EXPECT_GT(st.yields, previous) << fraction << ": stalls add yields to the base";
    previous = st.yields;
  }
}

TEST(CpuReadySweep, EachValueGetsItsOwnStallLength) {
  bench::StackPlan a, b;
  a.name = "a";
  b.name = "b";
  const auto plans = bench::SweepCpuReady({a, b}, {1.2, 28.4}, {"exp:1.7ms", "exp:13.6ms"});
  ASSERT_EQ(plans.size(), 4u);
  EXPECT_EQ(plans[1].name, "b RDY 1.2%");
  EXPECT_EQ(plans[1].ready_stall, "exp:1.7ms");
  EXPECT_EQ(plans[2].name, "a RDY 28.4%");
  EXPECT_EQ(plans[2].cpu_ready_pct, 28.4);
  EXPECT_EQ(plans[2].ready_stall, "exp:13.6ms");
  EXPECT_EQ(bench::SweepCpuReady({a}, {1.2, 5.1}, {"exp:4ms"})[1].ready_stall, "")
      << "one stall length for all: the knobs' own";
}

}  // namespace
}  // namespace vstack
