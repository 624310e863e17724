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
//
// The loop: every free slot asks Next and the requests go down as one batch; then the driver
// polls for at least one completion, and repeats. Requests that complete inside Submit (memory,
// null, file and CPU-bound layers) are resubmitted in the next batch; io_uring completes them
// in Poll. When Next says the run is over, Run waits for the requests in flight and returns.
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

template <typename Source>
class DepthDriver {
 public:
  // REQUIRES: `queue` and `source` outlive the driver; no one else uses the queue meanwhile.
  DepthDriver(IoQueue& queue, Source& source, uint32_t depth, const SlotBuffers& b)
      : queue_(queue),
        source_(source),
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
      bool over = false;
      while (!free_.empty()) {
        DriverSlot* s = free_.back();
        if (!source_.Next(*s)) {
          over = true;
          break;
        }
        free_.pop_back();
        batch_.push_back(&s->req);
      }
      if (!batch_.empty()) {
        if constexpr (requires { source_.Submitting(std::span<IoRequest* const>(batch_)); }) {
          source_.Submitting(std::span<IoRequest* const>(batch_));
        }
        queue_.Submit(batch_);
        batch_.clear();
      }
      if (over) break;
      if (queue_.in_flight() > 0) queue_.Poll(1);
    }
    queue_.WaitIdle();
  }

 private:
  static void OnDone(IoRequest& r) {
    DriverSlot& s = *static_cast<DriverSlot*>(r.user_data);
    auto& d = *static_cast<DepthDriver*>(s.driver);
    d.source_.Done(s);
    d.free_.push_back(&s);
  }

  IoQueue& queue_;
  Source& source_;
  AlignedBuffer buffers_;
  std::vector<DriverSlot> slots_;
  std::vector<DriverSlot*> free_;
  std::vector<IoRequest*> batch_;
};

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_DEPTH_DRIVER_H_
