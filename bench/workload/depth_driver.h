// The one loop that keeps a queue at depth, for every benchmark: the Google Benchmark suites
// (QueueDriver in bench/queue_driver.h, and transforms_bench through it) and the workload runner of `vstack bench`
// (bench/workload/runner.cc). DepthDriver owns the slots, their buffers and the loop; a Source
// decides each request (op, offset, content) and hears of each completion.
//
// A Source is any class with
//   bool Next(DriverSlot& s);  // fill s.req's op, offset, length and iov (s.read_iov or
//                              // s.write_iov, whose bytes it may write: the content hook);
//                              // false: the run is over, issue nothing more
//   void Done(DriverSlot& s);  // s.req completed; s.req.status is set
// and optionally
//   void Submitting(std::span<IoRequest* const> batch);  // right before a batch goes down
//   void Submitted();            // after each round of submissions (a scheduler's checkpoint)
//   void Waiting(bool begin);    // around each wait for completions (true before, false after)
//
// Two ways to keep the depth (Resubmit):
//   kFromCompletion  each completion asks Next and resubmits its slot from the callback; the
//                    queue plugs those into one batch (docs/design.md, "Plugging"). The least
//                    work per request: the Google Benchmark suites use it. Submitted and
//                    Waiting are not called (there is no loop to run them in).
//   kFromLoop        completions only free their slot; the loop asks Next for every free slot,
//                    submits them as one batch, then (unless a slot was freed meanwhile) polls
//                    for at least one completion, and repeats, so the caller's code runs between batches (the workload runner:
//                    submission times, the quantum scheduler).
// Either way, once Next says the run is over, Run waits for the requests in flight and returns.
#ifndef VSTACK_BENCH_WORKLOAD_DEPTH_DRIVER_H_
#define VSTACK_BENCH_WORKLOAD_DEPTH_DRIVER_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/block_device.h"

namespace vstack::bench {

// One request kept in flight, with its buffers (`block_size` bytes each; with one buffer per
// slot, read_iov and write_iov are the same).
struct DriverSlot {
  IoRequest req;
  iovec read_iov{};
  iovec write_iov{};
  uint32_t index = 0;     // 0 .. depth-1
  uint64_t start_ns = 0;  // free for the source (submission time)
  bool measured = false;  // free for the source
  void* driver = nullptr;
};

struct SlotBuffers {
  uint32_t block_size = 4096;
  uint32_t per_slot = 1;      // 1: reads and writes share the buffer; 2: separate ones
  size_t alignment = 4096;
  bool register_buffers = true;  // announce them with IoQueue::RegisterBuffers
};

enum class Resubmit { kFromCompletion, kFromLoop };

template <typename Source>
class DepthDriver {
 public:
  // REQUIRES: `queue` and `source` outlive the driver; no one else uses the queue meanwhile.
  DepthDriver(IoQueue& queue, Source& source, uint32_t depth, const SlotBuffers& b,
              Resubmit mode = Resubmit::kFromCompletion)
      : queue_(queue),
        source_(source),
        mode_(mode),
        buffers_(static_cast<size_t>(depth) * b.per_slot * b.block_size, b.alignment),
        slots_(depth) {
    free_.reserve(depth);
    batch_.reserve(depth);
    for (uint32_t i = 0; i < depth; ++i) {
      DriverSlot& s = slots_[i];
      std::byte* at = buffers_.data() + static_cast<size_t>(i) * b.per_slot * b.block_size;
      s.read_iov = iovec{at, b.block_size};
      s.write_iov = iovec{at + (b.per_slot - 1) * static_cast<size_t>(b.block_size), b.block_size};
      s.index = i;
      s.driver = this;
      s.req.user_data = &s;
      s.req.on_complete = &DepthDriver::OnDone;
    }
    // Slot 0 is taken first.
    for (uint32_t i = depth; i > 0; --i) free_.push_back(&slots_[i - 1]);
    if (b.register_buffers) {
      const iovec all = buffers_.iov();
      queue_.RegisterBuffers(std::span<const iovec>(&all, 1));
    }
  }
  ~DepthDriver() { queue_.WaitIdle(); }
  DepthDriver(const DepthDriver&) = delete;
  DepthDriver& operator=(const DepthDriver&) = delete;

  std::span<DriverSlot> slots() { return slots_; }
  // All of the slots' buffers, e.g. to fill them once before the run.
  std::span<std::byte> buffers() { return buffers_.span(); }

  // Issues requests until the source's Next returns false, then waits for those in flight.
  void Run() {
    for (;;) {
      const bool over = !FillBatch();
      SubmitBatch();
      if (mode_ == Resubmit::kFromCompletion) break;
      if constexpr (requires { source_.Submitted(); }) source_.Submitted();
      if (over) break;
      // Requests that completed during the submission (a layer that delivers what is due as
      // it submits) freed their slots already: refill them now instead of leaving them empty
      // until the next completion.
      if (queue_.in_flight() > 0 && free_.empty()) {
        if constexpr (requires { source_.Waiting(true); }) source_.Waiting(true);
        queue_.Poll(1);
        if constexpr (requires { source_.Waiting(false); }) source_.Waiting(false);
      }
    }
    queue_.WaitIdle();
  }

 private:
  // Asks Next for every free slot; false once the run is over.
  bool FillBatch() {
    while (!free_.empty()) {
      DriverSlot* s = free_.back();
      if (!source_.Next(*s)) return false;
      free_.pop_back();
      batch_.push_back(&s->req);
    }
    return true;
  }

  void SubmitBatch() {
    if (batch_.empty()) return;
    Submitting(batch_);
    queue_.Submit(batch_);
    batch_.clear();
  }

  void Submitting(std::span<IoRequest* const> batch) {
    if constexpr (requires { source_.Submitting(batch); }) source_.Submitting(batch);
  }

  static void OnDone(IoRequest& r) {
    DriverSlot& s = *static_cast<DriverSlot*>(r.user_data);
    auto& d = *static_cast<DepthDriver*>(s.driver);
    d.source_.Done(s);
    if (d.mode_ == Resubmit::kFromCompletion && d.source_.Next(s)) {
      IoRequest* one = &s.req;
      d.Submitting(std::span<IoRequest* const>(&one, 1));
      d.queue_.Submit(s.req);
      return;
    }
    d.free_.push_back(&s);
  }

  IoQueue& queue_;
  Source& source_;
  const Resubmit mode_;
  AlignedBuffer buffers_;
  std::vector<DriverSlot> slots_;
  std::vector<DriverSlot*> free_;
  std::vector<IoRequest*> batch_;
};

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_DEPTH_DRIVER_H_
