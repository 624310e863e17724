// The CPU sampler of lib/cpu_account.h: a registry of enrolled threads, one CPU-time timer per
// thread while sampling is on, and the SIGPROF handler that charges each sample.
#include "lib/cpu_account.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "lib/cpu_tag.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

namespace vstack {

namespace internal {
constinit thread_local CpuAccount* t_cpu_tag = nullptr;
}  // namespace internal

using internal::t_cpu_tag;

// One enrolled thread. `last_ns` is written by the thread's handler and, when sampling starts, by
// the thread that arms the timer; everything else is guarded by the registry's mutex.
struct EnrolledThread::Entry {
  CpuAccount* home = nullptr;
  pid_t tid = 0;
  clockid_t clock = -1;  // the thread's CPU clock (-1: unknown, never armed)
  timer_t timer{};
  bool armed = false;
  std::atomic<uint64_t> last_ns{0};  // the thread's CPU time at its previous sample
};

namespace {

// A sample at most every millisecond of a thread's CPU; the kernel's tick (CONFIG_HZ) makes it
// coarser where the tick is longer.
constexpr long kPeriodNs = 1'000'000;

constinit thread_local EnrolledThread::Entry* t_entry = nullptr;

struct Registry {
  std::mutex mu;
  std::vector<EnrolledThread::Entry*> threads;  // guarded by mu
  int sessions = 0;                            // CpuSampling objects alive; guarded by mu
  bool handler_installed = false;              // guarded by mu
};

Registry& Threads() {
  static Registry* r = new Registry;  // never destroyed: threads may leave during exit
  return *r;
}

uint64_t Ns(const timespec& ts) {
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t ClockNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return Ns(ts);
}

void Charge(CpuAccount* a, uint64_t ns) {
  a->ns.fetch_add(ns, std::memory_order_relaxed);
  a->samples.fetch_add(1, std::memory_order_relaxed);
}

// Charges the calling thread's CPU since its previous sample to its tag. Async-signal-safe.
void SampleSelf(EnrolledThread::Entry* e) {
  const uint64_t now = ClockNs(CLOCK_THREAD_CPUTIME_ID);
  const uint64_t last = e->last_ns.exchange(now, std::memory_order_relaxed);
  CpuAccount* tag = t_cpu_tag;
  Charge(tag != nullptr ? tag : e->home, now > last ? now - last : 0);
}

void OnSample(int, siginfo_t* info, void*) {
  EnrolledThread::Entry* e = t_entry;
  if (e == nullptr || info->si_code != SI_TIMER) return;  // not ours
  const int saved_errno = errno;
  SampleSelf(e);
  errno = saved_errno;
}

// REQUIRES: the registry's mutex held, `e` not armed.
bool Arm(EnrolledThread::Entry* e) {
  if (e->clock == -1) return false;
  e->last_ns.store(ClockNs(e->clock), std::memory_order_relaxed);
  sigevent sev{};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGPROF;
  sev.sigev_notify_thread_id = e->tid;
  if (timer_create(e->clock, &sev, &e->timer) != 0) return false;
  itimerspec period{};
  period.it_value.tv_nsec = kPeriodNs;
  period.it_interval.tv_nsec = kPeriodNs;
  if (timer_settime(e->timer, 0, &period, nullptr) != 0) {
    timer_delete(e->timer);
    return false;
  }
  e->armed = true;
  return true;
}

// REQUIRES: the registry's mutex held.
void Disarm(EnrolledThread::Entry* e) {
  if (!e->armed) return;
  timer_delete(e->timer);
  e->armed = false;
}

// REQUIRES: the registry's mutex held.
Status InstallHandler(Registry& r) {
  if (r.handler_installed) return OkStatus();
  struct sigaction old {};
  if (sigaction(SIGPROF, nullptr, &old) != 0) {
    return MakeError(Errc::kIo, std::string("CPU sampling: sigaction: ") + std::strerror(errno));
  }
  if ((old.sa_flags & SA_SIGINFO) || (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
    return MakeError(Errc::kBusy,
                     "CPU sampling: SIGPROF already has a handler (a profiler?); per-layer CPU "
                     "is not sampled");
  }
  struct sigaction sa {};
  sa.sa_sigaction = &OnSample;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, nullptr) != 0) {
    return MakeError(Errc::kIo, std::string("CPU sampling: sigaction: ") + std::strerror(errno));
  }
  r.handler_installed = true;
  return OkStatus();
}

}  // namespace

const char* CpuPhaseName(CpuPhase phase) {
  static constexpr const char* kNames[kCpuPhaseCount] = {
      "hash", "compress", "decompress", "pack", "checksum", "index", "metadata", "submit"};
  return kNames[static_cast<size_t>(phase)];
}

CpuAccount* CurrentCpuTag() { return t_cpu_tag; }

ScopedCpuTag::ScopedCpuTag(CpuAccount* account) : saved_(t_cpu_tag) { t_cpu_tag = account; }

ScopedCpuTag::~ScopedCpuTag() { t_cpu_tag = saved_; }

EnrolledThread::EnrolledThread(CpuAccount& home) : entry_(std::make_unique<Entry>()) {
  assert(t_entry == nullptr && "a thread is enrolled once at a time");
  entry_->home = &home;
  entry_->tid = gettid();
  if (pthread_getcpuclockid(pthread_self(), &entry_->clock) != 0) entry_->clock = -1;
  (void)t_cpu_tag;  // both thread-locals exist before a signal can read them
  t_entry = entry_.get();
  Registry& r = Threads();
  std::lock_guard lock(r.mu);
  r.threads.push_back(entry_.get());
  if (r.sessions > 0) Arm(entry_.get());  // a thread that cannot be armed stays unsampled
}

EnrolledThread::~EnrolledThread() {
  Registry& r = Threads();
  {
    std::lock_guard lock(r.mu);
    const bool was_armed = entry_->armed;
    Disarm(entry_.get());
    // The CPU since the last sample (a pending sample is delivered on the way out of the
    // timer_delete above, before this point), so that a thread that ends leaves nothing behind.
    if (was_armed) SampleSelf(entry_.get());
    r.threads.erase(std::find(r.threads.begin(), r.threads.end(), entry_.get()));
  }
  t_entry = nullptr;
}

Result<std::unique_ptr<CpuSampling>> CpuSampling::Start() {
  Registry& r = Threads();
  std::lock_guard lock(r.mu);
  VSTACK_RETURN_IF_ERROR(InstallHandler(r));
  if (r.sessions++ == 0) {
    for (EnrolledThread::Entry* e : r.threads) {
      if (!Arm(e)) {
        for (EnrolledThread::Entry* armed : r.threads) Disarm(armed);
        --r.sessions;
        return MakeError(Errc::kIo, std::string("CPU sampling: timer_create: ") +
                                        std::strerror(errno));
      }
    }
  }
  return std::unique_ptr<CpuSampling>(new CpuSampling);
}

CpuSampling::~CpuSampling() {
  Registry& r = Threads();
  std::lock_guard lock(r.mu);
  if (--r.sessions == 0) {
    for (EnrolledThread::Entry* e : r.threads) Disarm(e);
  }
}

}  // namespace vstack
