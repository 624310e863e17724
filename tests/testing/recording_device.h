// RecordingDevice: a layer for crash tests. It forwards every request to the device below and
// logs every write-type request (with a copy of its data) and every flush, with the order in
// which they were submitted and completed. CrashImages() then builds the images a power loss
// could leave at any instant, for a crash-consistency test to open, check and verify.
//
// The model (docs/design.md): a write that completed before a flush was submitted is durable
// once that flush completes, and a FUA write once it completes; any other write submitted
// before the crash may or may not have reached the media, in any order; nothing submitted
// after the crash did. No write that completed before a durable write was submitted can land
// on top of it afterwards (a disk cache keeps the newest data of a block). A crash image is as
// long as the base plus the writes applied to it: growing with Resize (which the recording
// device forwards, keeping kCapResizable) is not an event, as for a file grown by pwrite.
#ifndef VSTACK_TESTS_TESTING_RECORDING_DEVICE_H_
#define VSTACK_TESTS_TESTING_RECORDING_DEVICE_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "lib/forwarding_layer.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {

struct RecordedOp {
  Op op = Op::kWrite;  // kWrite, kWriteZeroes, kDiscard or kFlush
  IoFlags flags = 0;   // kIoFua: durable once completed
  uint64_t offset = 0;
  uint64_t length = 0;
  std::vector<unsigned char> data;  // kWrite only
  uint64_t submitted = 0;           // event sequence numbers
  uint64_t completed = UINT64_MAX;  // UINT64_MAX: never completed
};

class RecordingDevice final : public ForwardingLayer {
 public:
  // With `defer_completions`, every request completes only at a later Poll (at most one per
  // Poll, and a non-blocking Poll only every other time on average), in a pseudo-random order, whatever the device below did: a layer above cannot rely on
  // completion order or on inline completion, and the log's completion events are when the
  // layer above learnt of them.
  explicit RecordingDevice(DevicePtr lower, bool defer_completions = false);
  bool defer_completions() const { return defer_; }

  // A copy of the log so far.
  std::vector<RecordedOp> Log() const;
  // The number of events (submissions + completions) so far: crash points are 0..events().
  uint64_t events() const;

  // Called by the queue. Thread-safe.
  uint64_t OnSubmit(const IoRequest& r);
  void OnComplete(uint64_t index);

 protected:
  std::unique_ptr<ForwardingQueue> NewQueue(std::unique_ptr<IoQueue> lower) override;

 private:
  const bool defer_;
  mutable std::mutex mu_;
  std::vector<RecordedOp> log_;
  uint64_t seq_ = 0;
};

// Applies to `base` (the lower image as it was before recording started) the state after a crash
// at event `crash_point`: every write guaranteed durable (completed before a completed flush was
// submitted, or completed with FUA), plus each possibly-persisted write with probability 1/2
// (chosen by `rng`; `rng` == nullptr applies all of them), in a random order, except that a
// write never lands on top of an overlapping durable write submitted after it completed.
// Discarded ranges are treated like write-zeroes of that range or no-op at random.
// With `tear` (512 or 4096, and an `rng`), a possibly-persisted write may also land torn, as
// real devices tear writes at sector granularity: half the time, each `tear`-byte sector of it
// lands or not independently. Writes that are durable are never torn.
std::vector<unsigned char> CrashImage(const std::vector<unsigned char>& base,
                                      const std::vector<RecordedOp>& log, uint64_t crash_point,
                                      Rng* rng, uint32_t tear = 0);

// The crash image at `crash_point` in which none of the possibly-persisted writes landed: only
// what was durable (the least a power loss may leave; discards of durable ranges read as zeros).
std::vector<unsigned char> DurableImage(const std::vector<unsigned char>& base,
                                        const std::vector<RecordedOp>& log, uint64_t crash_point);

}  // namespace vstack::testing

#endif  // VSTACK_TESTS_TESTING_RECORDING_DEVICE_H_
