// The read side shared by the exact scan and the estimate of `vstack space`: every data range of
// the images (SpaceImage::used; zero extents are never read) cut into jobs of 4 MiB, read ahead
// by reader threads into a few buffers per worker, and handed to the visitor on worker threads
// as whole grains, so reads overlap hashing and compression.
#ifndef VSTACK_ANALYSIS_SPACE_READER_H_
#define VSTACK_ANALYSIS_SPACE_READER_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "analysis/space/space_images.h"

namespace vstack {

// Called for each job by worker `worker` (0 .. workers-1) with its data: `grains` whole grains
// (a partial last grain of an image padded with zeros). Calls from one worker never overlap; a
// visitor keeps per-worker state indexed by `worker`.
using GrainVisitor = std::function<void(unsigned worker, const SpaceJob& job, const std::byte* data,
                                        uint64_t grains)>;

// Reads every data range of `images` with `workers` reader threads (see WorkerCount) at most
// three jobs per worker ahead of `workers` visiting threads. Jobs reach the visitor in no
// particular order. The first read error stops the work and is returned, naming the image and
// offset.
Status ReadImageGrains(std::vector<SpaceImage>& images, unsigned workers, uint32_t grain,
                       const GrainVisitor& visit, const SpaceProgress& progress);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_READER_H_
