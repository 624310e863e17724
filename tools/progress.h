// A progress bar on stderr for long-running commands: "scan  45% |#########         | 1.2 GiB
// of 2.6 GiB  180 MiB/s  ETA 8s". Add() is thread-safe and cheap; the bar is redrawn at most
// five times a second, by whichever thread crosses the interval.
#ifndef VSTACK_TOOLS_PROGRESS_H_
#define VSTACK_TOOLS_PROGRESS_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace vstack::cli {

class Progress {
 public:
  // A disabled bar does nothing. `total` is in bytes.
  Progress(std::string label, uint64_t total, bool enabled);
  ~Progress() { Finish(); }

  void Add(uint64_t bytes);
  // Sets the absolute position (and the total, for work whose size is learnt as it goes).
  void Update(uint64_t done, uint64_t total);
  // Draws the final state and ends the line (once).
  void Finish();

  // "auto": on when stderr is a terminal and the input is large (>= 256 MiB).
  static bool Wanted(const std::string& mode, uint64_t total);

 private:
  void Draw(uint64_t done, bool final);

  const std::string label_;
  std::atomic<uint64_t> total_;
  const bool enabled_;
  const uint64_t start_ns_;
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> next_draw_ns_{0};
  std::mutex draw_mu_;
  bool finished_ = false;
};

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_PROGRESS_H_
