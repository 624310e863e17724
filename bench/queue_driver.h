// QueueDriver keeps `depth` requests in flight on one queue, resubmitting each from its
// completion callback, for a fixed number of I/Os. It is the engine of the Google Benchmark
// suites: one benchmark iteration batch = Run(n), so the cost per item is the cost per I/O at
// that queue depth, whether the device completes inline (memory, null, file) or in Poll (uring).
#ifndef VSTACK_BENCH_QUEUE_DRIVER_H_
#define VSTACK_BENCH_QUEUE_DRIVER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/block_device.h"

namespace vstack::bench {

struct DriverConfig {
  Op op = Op::kRead;           // kRead or kWrite
  uint32_t depth = 1;          // requests kept in flight
  uint32_t block_size = 4096;  // bytes per request
  uint64_t span = 0;           // offsets are uniform random, block-aligned, in [0, span); 0 = device size
  uint64_t seed = 1;
  bool register_buffers = true;  // announce the buffers with IoQueue::RegisterBuffers
};

class QueueDriver {
 public:
  // REQUIRES: `queue` outlives the driver and is used by no one else meanwhile.
  QueueDriver(IoQueue& queue, const DriverConfig& config);
  ~QueueDriver();

  // Performs exactly `n` I/Os (n >= depth keeps the queue full), returning when all completed.
  // Returns the first error, if any request failed.
  std::error_code Run(uint64_t n);

 private:
  struct Slot {
    IoRequest req;
    iovec iov;
    QueueDriver* driver;
  };
  static void OnComplete(IoRequest& req);
  void Prepare(Slot& s);
  uint64_t NextOffset();

  IoQueue& queue_;
  DriverConfig config_;
  AlignedBuffer buffers_;
  std::vector<Slot> slots_;
  uint64_t blocks_;  // span / block_size
  uint64_t rng_;
  uint64_t to_issue_ = 0;
  std::error_code error_;
};

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_QUEUE_DRIVER_H_
