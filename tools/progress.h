// A progress bar on stderr for long-running commands: "scan  45% |#########         | 1.2 GiB
// of 2.6 GiB  180 MiB/s  ETA 8s", or in a unit of its own: "move  40% |...| 2 of 5 blocks
// 1 blocks/s". The total is fixed when the bar is made; Add() and Set() are thread-safe and
// cheap; the bar is redrawn at most five times a second, by whichever thread crosses the
// interval. Finish() draws the final state: a caller that counted all its work ends at 100%.
#ifndef VSTACK_TOOLS_PROGRESS_H_
#define VSTACK_TOOLS_PROGRESS_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace vstack::cli {

class Progress {
 public:
  // A disabled bar does nothing. `unit` names what is counted ("blocks"); empty means bytes,
  // shown as sizes. The bar is drawn on `out`.
  Progress(std::string label, uint64_t total, bool enabled, std::string unit = "",
           std::FILE* out = stderr);
  ~Progress() { Finish(); }

  // Counts `n` more units done.
  void Add(uint64_t n);
  // Sets the units done so far.
  void Set(uint64_t done);
  // Draws the final state and ends the line (once).
  void Finish();

  // "auto": on when stderr is a terminal and the input is large (>= 256 MiB).
  static bool Wanted(const std::string& mode, uint64_t total);

 private:
  void MaybeDraw(uint64_t done);
  void Draw(uint64_t done, bool final);
  std::string Amount(uint64_t n) const;

  const std::string label_;
  const uint64_t total_;
  const bool enabled_;
  const std::string unit_;
  std::FILE* const out_;
  const uint64_t start_ns_;
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> next_draw_ns_{0};
  std::mutex draw_mu_;
  bool finished_ = false;
};

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_PROGRESS_H_
