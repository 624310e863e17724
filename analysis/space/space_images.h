// The input side of the space analysis (`vstack space`): opening images (raw files, VHD through
// OpenImage's probes, or any stack spec) read-only, finding the grains that hold written data,
// and cutting them into jobs for worker threads. Scan and replay read exactly the same grains.
#ifndef VSTACK_ANALYSIS_SPACE_IMAGES_H_
#define VSTACK_ANALYSIS_SPACE_IMAGES_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/block_device.h"
#include "lib/sync_io.h"

namespace vstack {

struct SpaceImage {
  std::string name;  // as given on the command line
  std::string spec;  // as opened
  DevicePtr device;
  uint64_t size = 0;
  // Grain-aligned ranges (the last may end at `size`) overlapping allocated data extents: the
  // ranges to read.
  std::vector<std::pair<uint64_t, uint64_t>> used;
  // Grain-aligned ranges the extent map says read as zeros (allocated zero extents, such as
  // VHDX's zero blocks) and that no data extent touches: counted as used zero grains without
  // reading them.
  std::vector<std::pair<uint64_t, uint64_t>> zero;
  // Allocated bytes: `used` plus `zero`.
  uint64_t used_bytes() const;
  // The bytes to read: `used` only.
  uint64_t data_bytes() const;
  // Grains in `zero` (a partial last grain counts as one).
  uint64_t zero_grains(uint32_t grain) const;
};

// The note for images whose size is not a multiple of `grain` and whose last grain is used: that
// grain counts whole from "used" on (a grain layer stores it whole), so "used" can exceed
// "provisioned" by less than a grain per image. "" when there are none.
std::string PartialGrainNote(const std::vector<SpaceImage>& images, uint32_t grain);

// Told the bytes of image data each worker has just finished, to drive a progress display, and
// asked whether to go on: false stops the run, which ends with Errc::kCancelled ("interrupted")
// after removing what it created (a replay's files or RBD images). Called from the worker threads
// at once: it must be thread-safe. May be empty.
using SpaceProgress = std::function<bool(uint64_t bytes)>;

// The error of a run that `progress` stopped.
Error SpaceInterrupted();

// Opens every image read-only and maps its written grains.
Result<std::vector<SpaceImage>> OpenSpaceImages(const std::vector<std::string>& names,
                                                uint32_t grain);

// A piece of work: `length` bytes at `offset` of image `image`.
struct SpaceJob {
  size_t image = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// The job size of the scan and the replay: large enough that a job's read is sequential I/O.
inline constexpr uint64_t kSpaceJobBytes = 4 << 20;

// Every used range cut into jobs of at most `max` bytes (a multiple of the grain), handed out
// to worker threads in order.
class SpaceJobs {
 public:
  SpaceJobs(const std::vector<SpaceImage>& images, uint64_t max);
  // The next job, or false when there is none left. Thread-safe.
  bool Next(SpaceJob* job);

 private:
  std::vector<SpaceJob> jobs_;
  std::atomic<size_t> next_{0};
};

// One SyncIo per device for the calling worker, opened on first use. Not thread-safe: one per
// worker thread.
class WorkerIo {
 public:
  SyncIo& For(BlockDevice& device, size_t slot);

 private:
  std::vector<std::unique_ptr<SyncIo>> io_;
};

// Worker threads to use: `requested`, or one per CPU; 1 if any device is single-queue.
unsigned WorkerCount(unsigned requested, const std::vector<BlockDevice*>& devices);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_IMAGES_H_
