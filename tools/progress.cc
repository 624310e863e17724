#include "tools/progress.h"

#include <cstdio>
#include <string>

#include "lib/size.h"

namespace vstack::cli {

void ProgressBar::Update(uint64_t done, uint64_t total) {
  if (!enabled_) return;
  const int permille = total == 0 ? 1000 : static_cast<int>(done * 1000 / total);
  if (permille == last_permille_) return;
  last_permille_ = permille;
  constexpr int kWidth = 32;
  const int filled = permille * kWidth / 1000;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "\r[%s] %5.1f%%  %s / %s   ", bar.c_str(), permille / 10.0,
               FormatSize(done).c_str(), FormatSize(total).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace vstack::cli
