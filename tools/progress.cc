#include "tools/progress.h"

#include <unistd.h>

#include <cstdio>

#include "lib/clock.h"
#include "lib/size.h"

namespace vstack::cli {

Progress::Progress(std::string label, uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled), start_ns_(NowNs()) {}

bool Progress::Wanted(const std::string& mode, uint64_t total) {
  if (mode == "on") return true;
  if (mode == "off") return false;
  return ::isatty(STDERR_FILENO) && total >= (uint64_t{256} << 20);
}

void Progress::Add(uint64_t bytes) {
  if (!enabled_) return;
  const uint64_t done = done_.fetch_add(bytes) + bytes;
  const uint64_t now = NowNs();
  uint64_t next = next_draw_ns_.load(std::memory_order_relaxed);
  if (now < next || !next_draw_ns_.compare_exchange_strong(next, now + 200'000'000)) return;
  std::unique_lock lock(draw_mu_, std::try_to_lock);
  if (lock.owns_lock()) Draw(done, false);
}

void Progress::Update(uint64_t done, uint64_t total) {
  if (!enabled_) return;
  total_.store(total);
  done_.store(done);
  Add(0);
}

void Progress::Finish() {
  if (!enabled_) return;
  std::lock_guard lock(draw_mu_);
  if (finished_) return;
  finished_ = true;
  Draw(done_.load(), true);
}

void Progress::Draw(uint64_t done, bool final) {
  const uint64_t total = total_.load();
  constexpr int kWidth = 30;
  const double frac = total ? std::min(1.0, double(done) / double(total)) : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  const double secs = double(NowNs() - start_ns_) / 1e9;
  const double rate = secs > 0 ? double(done) / secs : 0;
  std::string bar(filled, '#');
  bar.resize(kWidth, ' ');
  std::string eta;
  if (!final && rate > 0 && done < total) {
    eta = "  ETA " + std::to_string(static_cast<int>(double(total - done) / rate + 0.5)) + "s";
  }
  std::fprintf(stderr, "\r%s %3d%% |%s| %s of %s  %s/s%s   %s", label_.c_str(),
               static_cast<int>(frac * 100), bar.c_str(), FormatSize(done).c_str(),
               FormatSize(total).c_str(), FormatSize(static_cast<uint64_t>(rate)).c_str(),
               eta.c_str(), final ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace vstack::cli
