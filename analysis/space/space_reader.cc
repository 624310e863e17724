#include "analysis/space/space_reader.h"

#include <cstring>
#include <mutex>
#include <thread>

#include "lib/aligned_buffer.h"

namespace vstack {
namespace {

constexpr uint64_t kJobBytes = 4 << 20;

}  // namespace

Status ReadImageGrains(std::vector<SpaceImage>& images, unsigned workers, uint32_t grain,
                       const GrainVisitor& visit, const SpaceProgress& progress) {
  SpaceJobs jobs(images, kJobBytes);
  std::mutex error_mu;
  Error error;
  std::atomic<bool> failed{false};
  auto work = [&](unsigned w) {
    WorkerIo io;
    AlignedBuffer buf(kJobBytes);
    SpaceJob job;
    while (!failed && jobs.Next(&job)) {
      SpaceImage& img = images[job.image];
      const std::error_code ec =
          io.For(*img.device, job.image).Read(job.offset, buf.span().first(job.length));
      if (ec) {
        std::lock_guard lock(error_mu);
        if (!failed.exchange(true)) {
          error = MakeError(ec, img.name + ": cannot read offset " + std::to_string(job.offset) +
                                    ": " + ec.message());
        }
        return;
      }
      // The image's last grain may be partial: it counts as a whole grain padded with zeros.
      const uint64_t grains = (job.length + grain - 1) / grain;
      std::memset(buf.data() + job.length, 0, grains * grain - job.length);
      visit(w, job, buf.data(), grains);
      if (progress) progress(job.length);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) threads.emplace_back(work, w);
  for (auto& t : threads) t.join();
  if (failed) return error;
  return OkStatus();
}

}  // namespace vstack
