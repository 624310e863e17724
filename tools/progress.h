// A progress bar on stderr for long-running commands (`convert -p`, `compact -p`):
//   [#################...............]  52.4%  537 MiB / 1 GiB
// redrawn in place at most every 0.1% and finished with a newline. Disabled: does nothing.
#ifndef VSTACK_TOOLS_PROGRESS_H_
#define VSTACK_TOOLS_PROGRESS_H_

#include <cstdint>

namespace vstack::cli {

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  ~ProgressBar() { Finish(); }
  void Update(uint64_t done, uint64_t total);
  void Finish();

 private:
  bool enabled_;
  bool drawn_ = false;
  int last_permille_ = -1;
};

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_PROGRESS_H_
