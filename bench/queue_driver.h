// The Google Benchmark suites' source for the one queue-depth loop (DepthDriver,
// bench/workload/depth_driver.h, which the workload runner of `vstack bench` uses too).
#ifndef VSTACK_BENCH_QUEUE_DRIVER_H_
#define VSTACK_BENCH_QUEUE_DRIVER_H_

#include <cstdint>
#include <functional>
#include <span>

#include "bench/workload/depth_driver.h"
#include "lib/block_device.h"

namespace vstack::bench {

// The Google Benchmark suites' driver: exactly `n` requests per Run(n) at a fixed depth, so the
// cost per item is the cost per I/O at that depth.
struct DriverConfig {
  Op op = Op::kRead;           // kRead or kWrite
  uint32_t depth = 1;          // requests kept in flight
  uint32_t block_size = 4096;  // bytes per request
  uint64_t span = 0;           // offsets are block-aligned in [base, base + span); 0 = device size
  uint64_t base = 0;
  bool sequential = false;     // false: uniform random offsets; true: base, base + bs, ... wrapping
  uint64_t seed = 1;
  bool register_buffers = true;  // announce the buffers with IoQueue::RegisterBuffers
  // Writes only, the content hook: called on the request's buffer before each write with the
  // number of writes before it, e.g. to make its data unique for a dedup or compression layer.
  // Empty: every write carries the same 0x5A bytes.
  std::function<void(std::span<std::byte> buffer, uint64_t n)> fill = nullptr;
};

class QueueDriver {
 public:
  // REQUIRES: `queue` outlives the driver and is used by no one else meanwhile.
  QueueDriver(IoQueue& queue, const DriverConfig& config);

  // Performs exactly `n` I/Os (n >= depth keeps the queue full), returning when all completed.
  // Returns the first error, if any request failed.
  std::error_code Run(uint64_t n);

  // The source side of the driver (DepthDriver's Source).
  bool Next(DriverSlot& s);
  void Done(DriverSlot& s);

 private:
  uint64_t NextOffset();

  DriverConfig config_;
  uint64_t blocks_;  // span / block_size
  uint64_t rng_;
  uint64_t left_ = 0;    // requests still to issue in this Run
  uint64_t writes_ = 0;  // writes issued so far (the content hook's n)
  uint64_t next_block_ = 0;
  std::error_code error_;
  DepthDriver<QueueDriver> driver_;  // last: its destructor waits for the queue
};

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_QUEUE_DRIVER_H_

#endif  // VSTACK_BENCH_QUEUE_DRIVER_H_
