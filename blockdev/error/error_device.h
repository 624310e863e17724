// error: fault injection, in the manner of qemu's blkdebug and nbdkit's error filter. Requests
// of the chosen kinds (read, write, zero, flush, trim) that overlap the chosen byte range are
// "matching"; matching requests are numbered 1, 2, 3... in the order the device receives them
// (over all queues). Request k fails with `errno` when k > after, k <= after + count (count 0:
// no end) and a draw from hash(seed, k) falls below `rate`. So the same seed and the same order
// of requests fail the same requests; a single-threaded workload is fully deterministic.
// Failed requests never reach the device below. Its queue is a RefusingQueue, whose Translate
// hook asks Refuse(); everything else is the device below's, inherited from
// ForwardingLayer (lib/forwarding_layer.h). docs/layers/error.md.
//
// Spec: error:ops=write,errno=ENOSPC,after=100+<lower>
//       error:ops=read/flush,rate=0.01,seed=7,offset=1M,length=64K+<lower>
#ifndef VSTACK_BLOCKDEV_ERROR_ERROR_DEVICE_H_
#define VSTACK_BLOCKDEV_ERROR_ERROR_DEVICE_H_

#include <atomic>
#include <string>

#include "blockdev/emulation/emulation_layer.h"

namespace vstack {

struct ErrorConfig {
  uint32_t ops = 0;  // bit (1 << Op) for each op that may fail
  int error = 5;     // errno (EIO)
  double rate = 1.0;
  uint64_t after = 0;
  uint64_t count = 0;               // 0 = no limit
  uint64_t offset = 0, length = 0;  // length 0 = to the end of the device
  uint64_t seed = 1;
};

class ErrorDevice final : public EmulationLayer<ErrorConfig> {
 public:
  enum Counter { kMatched, kFailed };

  ErrorDevice(DevicePtr lower, ErrorConfig config);

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;

  // True if `req` is matching and its number says it fails. Thread-safe.
  bool ShouldFail(const IoRequest& req);
  // The queue's check (RefusingQueue): the errno if `req` fails, counted. Thread-safe.
  std::error_code Refuse(const IoRequest& req);

 protected:
  std::unique_ptr<ForwardingQueue> NewQueue(std::unique_ptr<IoQueue> lower) override;

 private:
  std::atomic<uint64_t> matched_{0};
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_ERROR_ERROR_DEVICE_H_
