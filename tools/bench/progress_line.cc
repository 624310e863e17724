// The live progress line of vstack bench (progress_line.h).
#include "tools/bench/progress_line.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "bench/report/report.h"

namespace vstack::cli {

using bench::Num;

ProgressLine::ProgressLine(bool enabled) : enabled_(enabled), tty_(isatty(2)) {}

void ProgressLine::Update(const bench::MatrixProgress& p) {
  if (!enabled_) return;
  const std::string round = p.rounds ? fmt::format("{}/{}", p.round + 1, p.rounds)
                                     : fmt::format("{}, auto", p.round + 1);
  std::string line = fmt::format("[round {}] {:<18} {}", round, p.stack, p.activity);
  const bool running = p.activity == "running" && p.run.elapsed_s > 0;
  if (running) {
    line += p.run.warming_up ? fmt::format("  {:.1f}/{:.1f} s  warming up", p.run.elapsed_s, p.run.total_s)
                             : p.run.total_s > 0
                                   ? fmt::format("  {:.1f}/{:.1f} s  {} IOPS", p.run.elapsed_s,
                                                 p.run.total_s, Num(p.run.iops))
                                   : fmt::format("  {:.1f} s  {} I/Os  {} IOPS", p.run.elapsed_s,
                                                 Num(double(p.run.ios)), Num(p.run.iops));
  }
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    dirty_ = true;
  } else if (!running && line != last_) {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  last_ = line;
  std::fflush(stderr);
}

void ProgressLine::Clear() {
  if (dirty_) std::fprintf(stderr, "\r\033[K");
  dirty_ = false;
}

}  // namespace vstack::cli
