#include "analysis/space/space_reader.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "lib/aligned_buffer.h"

namespace vstack {
namespace {

constexpr uint64_t kJobBytes = 4 << 20;

// One worker's two buffers: a reader thread fills one with the next job while the worker
// visits the other (read-ahead, so reads overlap hashing and compression).
class ReadAhead {
 public:
  struct Slot {
    AlignedBuffer buf{kJobBytes};
    SpaceJob job;
    std::error_code ec;
    bool full = false, last = false;  // last: no job in it, the reader is done
  };

  // The next filled slot (the worker's side), or null once `stop` is set; Release it when
  // visited.
  Slot* Take(const std::atomic<bool>& stop) {
    std::unique_lock lock(mu_);
    Slot& s = slots_[take_];
    cv_.wait(lock, [&] { return s.full || stop; });
    return stop ? nullptr : &s;
  }
  void Release() {
    std::lock_guard lock(mu_);
    slots_[take_].full = false;
    take_ ^= 1;
    cv_.notify_all();
  }
  // The reader's side: the next empty slot, then Put it.
  Slot* Empty(const std::atomic<bool>& stop) {
    std::unique_lock lock(mu_);
    Slot& s = slots_[put_];
    cv_.wait(lock, [&] { return !s.full || stop; });
    return stop ? nullptr : &s;
  }
  void Put() {
    std::lock_guard lock(mu_);
    slots_[put_].full = true;
    put_ ^= 1;
    cv_.notify_all();
  }
  void Wake() {
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Slot slots_[2];
  int take_ = 0, put_ = 0;
};

}  // namespace

Status ReadImageGrains(std::vector<SpaceImage>& images, unsigned workers, uint32_t grain,
                       const GrainVisitor& visit, const SpaceProgress& progress) {
  SpaceJobs jobs(images, kJobBytes);
  std::mutex error_mu;
  Error error;
  std::atomic<bool> failed{false};
  std::vector<std::unique_ptr<ReadAhead>> ahead;
  for (unsigned w = 0; w < workers; ++w) ahead.push_back(std::make_unique<ReadAhead>());
  auto read = [&](unsigned w) {
    WorkerIo io;
    SpaceJob job;
    for (;;) {
      ReadAhead::Slot* s = ahead[w]->Empty(failed);
      if (s == nullptr) return;
      s->last = !jobs.Next(&job);
      if (!s->last) {
        s->job = job;
        s->ec = io.For(*images[job.image].device, job.image)
                    .Read(job.offset, s->buf.span().first(job.length));
      }
      ahead[w]->Put();
      if (s->last || s->ec) return;
    }
  };
  auto work = [&](unsigned w) {
    for (;;) {
      ReadAhead::Slot* slot = ahead[w]->Take(failed);
      if (slot == nullptr || slot->last) return;
      ReadAhead::Slot& s = *slot;
      const SpaceJob& job = s.job;
      if (s.ec) {
        std::lock_guard lock(error_mu);
        if (!failed.exchange(true)) {
          error = MakeError(s.ec, images[job.image].name + ": cannot read offset " +
                                      std::to_string(job.offset) + ": " + s.ec.message());
        }
        for (auto& a : ahead) a->Wake();
        return;
      }
      // The image's last grain may be partial: it counts as a whole grain padded with zeros.
      const uint64_t grains = (job.length + grain - 1) / grain;
      std::memset(s.buf.data() + job.length, 0, grains * grain - job.length);
      visit(w, job, s.buf.data(), grains);
      if (progress) progress(job.length);
      ahead[w]->Release();
    }
  };
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back(read, w);
    threads.emplace_back(work, w);
  }
  for (auto& t : threads) t.join();
  if (failed) return error;
  return OkStatus();
}

}  // namespace vstack
