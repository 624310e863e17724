// Making the images a benchmark runs on: a private temporary directory that is always removed,
// image creation through the registry (CreateImage), identical fresh copies for every round,
// and filling a device with the workload's own kind of data before it is measured.
#ifndef VSTACK_BENCH_WORKLOAD_IMAGE_SETUP_H_
#define VSTACK_BENCH_WORKLOAD_IMAGE_SETUP_H_

#include <atomic>
#include <string>

#include "bench/workload/knobs.h"
#include "lib/block_device.h"
#include "lib/errors.h"

namespace vstack::bench {

// A directory "vstack-bench.XXXXXX" under `parent`, removed with everything in it on
// destruction (also after Ctrl-C, which only sets a flag). Move-only.
class ScratchDir {
 public:
  static Result<ScratchDir> Create(const std::string& parent);
  ScratchDir(ScratchDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir();
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// The directory for scratch files when the user names none: $TMPDIR, else /var/tmp.
std::string DefaultScratchParent();

// Copies `src` to a new file `dst`, keeping holes as holes (SEEK_DATA/SEEK_HOLE), so a copy of a
// fresh sparse image is just as fresh. Fails if `dst` exists.
Status CopySparse(const std::string& src, const std::string& dst);

// Removes `path` if it exists.
Status RemoveFile(const std::string& path);

// Writes every byte of the region the workload `k` will use, sequentially in large requests,
// with data made the way the workload makes it (unique chunks, k.compress_pct zeros; a seed of
// its own so later writes do not repeat it). Stops early, with an error, when `stop` is set.
Status FillDevice(BlockDevice& device, const WorkloadKnobs& k, const std::atomic<bool>* stop);

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_IMAGE_SETUP_H_
