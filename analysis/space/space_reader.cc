#include "analysis/space/space_reader.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "lib/aligned_buffer.h"

namespace vstack {
namespace {

// Buffers per worker: one being visited, the others being read ahead.
constexpr unsigned kBuffersPerWorker = 3;

// A job's data, read by a reader thread and visited by a worker.
struct Filled {
  SpaceJob job;
  AlignedBuffer* buf = nullptr;
};

// The hand-over between reader and worker threads: empty buffers go to the readers, filled ones
// to the workers. Bounded by the buffers, so the readers run at most that far ahead.
class Pipeline {
 public:
  // An empty buffer, or nullptr once stopped.
  AlignedBuffer* TakeEmpty() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stopped_ || !empty_.empty(); });
    if (stopped_) return nullptr;
    AlignedBuffer* b = empty_.back();
    empty_.pop_back();
    return b;
  }
  void PutEmpty(AlignedBuffer* b) {
    std::lock_guard lock(mu_);
    empty_.push_back(b);
    cv_.notify_all();
  }
  // A filled buffer; false once every reader is done and nothing is left, or once stopped.
  bool TakeFilled(Filled* f) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stopped_ || !filled_.empty() || readers_ == 0; });
    if (stopped_ || filled_.empty()) return false;
    *f = filled_.front();
    filled_.pop_front();
    return true;
  }
  void PutFilled(const Filled& f) {
    std::lock_guard lock(mu_);
    filled_.push_back(f);
    cv_.notify_all();
  }
  void ReaderStarted() {
    std::lock_guard lock(mu_);
    ++readers_;
  }
  void ReaderDone() {
    std::lock_guard lock(mu_);
    --readers_;
    cv_.notify_all();
  }
  // Makes every Take return at once (after an error).
  void Stop() {
    std::lock_guard lock(mu_);
    stopped_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<AlignedBuffer*> empty_;
  std::deque<Filled> filled_;
  unsigned readers_ = 0;
  bool stopped_ = false;
};

}  // namespace

Status ReadImageGrains(std::vector<SpaceImage>& images, unsigned workers, uint32_t grain,
                       const GrainVisitor& visit, const SpaceProgress& progress) {
  SpaceJobs jobs(images, kSpaceJobBytes);
  Pipeline pipe;
  std::vector<std::unique_ptr<AlignedBuffer>> buffers;
  for (unsigned i = 0; i < workers * kBuffersPerWorker; ++i) {
    buffers.push_back(std::make_unique<AlignedBuffer>(kSpaceJobBytes));
    pipe.PutEmpty(buffers.back().get());
  }
  std::mutex error_mu;
  Error error;
  bool failed = false;
  auto fail = [&](Error e) {  // the first error is the run's; every Take returns at once
    std::lock_guard lock(error_mu);
    if (!failed) {
      failed = true;
      error = std::move(e);
    }
    pipe.Stop();
  };
  // As many readers as workers: a device without kCapThreadSafe gets one of each (WorkerCount),
  // and storage that serves several reads at once gets them.
  auto read = [&]() {
    WorkerIo io;
    SpaceJob job;
    while (AlignedBuffer* buf = pipe.TakeEmpty()) {
      if (!jobs.Next(&job)) {
        pipe.PutEmpty(buf);
        break;
      }
      SpaceImage& img = images[job.image];
      const std::error_code ec =
          io.For(*img.device, job.image).Read(job.offset, buf->span().first(job.length));
      if (ec) {
        fail(MakeError(ec, img.name + ": cannot read offset " + std::to_string(job.offset) + ": " +
                               ec.message()));
        break;
      }
      pipe.PutFilled({job, buf});
    }
    pipe.ReaderDone();
  };
  auto work = [&](unsigned w) {
    Filled f;
    while (pipe.TakeFilled(&f)) {
      // The image's last grain may be partial: it counts as a whole grain padded with zeros.
      const uint64_t grains = (f.job.length + grain - 1) / grain;
      std::memset(f.buf->data() + f.job.length, 0, grains * grain - f.job.length);
      visit(w, f.job, f.buf->data(), grains);
      pipe.PutEmpty(f.buf);
      if (progress && !progress(f.job.length)) fail(SpaceInterrupted());
    }
  };
  std::vector<std::thread> threads;
  for (unsigned r = 0; r < workers; ++r) pipe.ReaderStarted();
  for (unsigned r = 0; r < workers; ++r) threads.emplace_back(read);
  for (unsigned w = 0; w < workers; ++w) threads.emplace_back(work, w);
  for (auto& t : threads) t.join();
  std::lock_guard lock(error_mu);
  if (failed) return error;
  return OkStatus();
}

}  // namespace vstack
