#include "tools/progress.h"

#include <unistd.h>

#include "lib/clock.h"
#include "lib/size.h"

namespace vstack::cli {

Progress::Progress(std::string label, uint64_t total, bool enabled, std::string unit,
                   std::FILE* out)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      unit_(std::move(unit)),
      out_(out),
      start_ns_(NowNs()) {}

bool Progress::Wanted(const std::string& mode, uint64_t total) {
  if (mode == "on") return true;
  if (mode == "off") return false;
  return ::isatty(STDERR_FILENO) && total >= (uint64_t{256} << 20);
}

void Progress::Add(uint64_t n) {
  if (!enabled_) return;
  MaybeDraw(done_.fetch_add(n) + n);
}

void Progress::Set(uint64_t done) {
  if (!enabled_) return;
  done_.store(done);
  MaybeDraw(done);
}

void Progress::MaybeDraw(uint64_t done) {
  const uint64_t now = NowNs();
  uint64_t next = next_draw_ns_.load(std::memory_order_relaxed);
  if (now < next || !next_draw_ns_.compare_exchange_strong(next, now + 200'000'000)) return;
  std::unique_lock lock(draw_mu_, std::try_to_lock);
  if (lock.owns_lock() && !finished_) Draw(done, false);
}

void Progress::Finish() {
  if (!enabled_) return;
  std::lock_guard lock(draw_mu_);
  if (finished_) return;
  finished_ = true;
  Draw(done_.load(), true);
}

std::string Progress::Amount(uint64_t n) const {
  return unit_.empty() ? FormatSize(n) : std::to_string(n);
}

void Progress::Draw(uint64_t done, bool final) {
  constexpr int kWidth = 30;
  const double frac = total_ ? std::min(1.0, double(done) / double(total_)) : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  const double secs = double(NowNs() - start_ns_) / 1e9;
  const double rate = secs > 0 ? double(done) / secs : 0;
  std::string bar(filled, '#');
  bar.resize(kWidth, ' ');
  std::string eta;
  if (!final && rate > 0 && done < total_) {
    eta = "  ETA " + std::to_string(static_cast<int>(double(total_ - done) / rate + 0.5)) + "s";
  }
  const std::string unit = unit_.empty() ? "" : " " + unit_;
  std::fprintf(out_, "\r%s %3d%% |%s| %s of %s%s  %s%s/s%s   %s", label_.c_str(),
               static_cast<int>(frac * 100), bar.c_str(), Amount(done).c_str(),
               Amount(total_).c_str(), unit.c_str(), Amount(static_cast<uint64_t>(rate)).c_str(),
               unit.c_str(), eta.c_str(), final ? "\n" : "");
  std::fflush(out_);
}

}  // namespace vstack::cli
