#include "tools/interrupt.h"

#include <time.h>

#include <cstdint>

namespace vstack::cli {
namespace {

std::atomic<int64_t> g_first_signal_ns{0};

void OnSignal(int sig) {
  constexpr int64_t kRepeatNs = 250'000'000;
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  const int64_t now = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  int64_t first = 0;
  if (g_first_signal_ns.compare_exchange_strong(first, now)) {
    InterruptScope::stop().store(true);
    return;
  }
  if (now - first < kRepeatNs) return;
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

std::atomic<bool>& InterruptScope::stop() {
  static std::atomic<bool> flag{false};
  return flag;
}

InterruptScope::InterruptScope() {
  stop().store(false);
  g_first_signal_ns.store(0);
  struct sigaction sa {};
  sa.sa_handler = &OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

InterruptScope::~InterruptScope() {
  // After an interrupt the handler stays: the command is finishing (its report, its exit 130),
  // and a repeat of that signal must not kill it on the way.
  if (stop().load()) return;
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

}  // namespace vstack::cli
