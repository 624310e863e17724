// TimedQueue: a forwarding queue (lib/forwarding_queue.h) whose requests complete at a time the
// subclass chooses. The shared policy of delay: (a device's service time) and hv: (a
// hypervisor's added latency); it uses the forwarding queue's Accept, OnLowerDone, AfterSubmit
// and Progress hooks, and forwards every request unchanged.
//
// Each request enters service when a service slot is free (all at once without a limit; FIFO
// otherwise), is forwarded to the lower queue at that moment, and gets a deadline:
// now + ServiceNs(request), later if a bandwidth cap says the transfer ends later. The caller's
// request completes when both its lower request has completed and its deadline has passed, so
// the modelled service time overlaps the lower device's own time (over null or memory it is the
// whole latency; over a slower device the slower of the two wins). With `after_lower` the
// service time starts when the lower request completes instead: it adds to the lower device's
// time (hv:, whose exit and completion interrupt surround the device's work).
//
// No busy-waiting: deadlines sit in a min-heap; Poll(wait) waits for the earliest one with a
// DeadlineWaiter (sleeps, spins at most its last 100 µs, and compensates the host's measured
// wake-up lateness so the mean delivery time is the deadline), or blocks on the lower queue
// while it has requests in flight. The time is read once per expiry pass. Limits and bandwidth
// are per queue, i.e. per thread: a workload of T threads sees T x the limit.
#ifndef VSTACK_BLOCKDEV_EMULATION_TIMED_QUEUE_H_
#define VSTACK_BLOCKDEV_EMULATION_TIMED_QUEUE_H_

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "blockdev/emulation/deadline_waiter.h"
#include "lib/clock.h"
#include "lib/forwarding_queue.h"

namespace vstack {

struct TimedQueueOptions {
  uint32_t max_in_service = 0;  // requests served at a time; 0 = no limit
  uint64_t bytes_per_s = 0;     // transfer rate of reads and writes; 0 = no cap
  bool after_lower = false;     // service starts when the lower request completes (adds)
};

class TimedQueue : public ForwardingQueue {
 public:
  // The counters every device using a TimedQueue declares first, in this order (its own
  // counters follow): summed service time drawn; summed lateness past their deadline and summed
  // earliness before it of the completions delivered by the timer (its accuracy: the mean
  // delivery error is (late_ns - early_ns) / requests); requests that waited for a service slot.
  static std::vector<std::string> CounterNames() {
    return {"service_ns", "late_ns", "early_ns", "waited_for_slot"};
  }
  static constexpr size_t kFirstOwnCounter = 4;

 protected:
  TimedQueue(BlockDevice& device, std::unique_ptr<IoQueue> lower, Clock& clock,
             TimedQueueOptions options)
      : ForwardingQueue(device, std::move(lower)), clock_(clock), options_(options) {}

  // The service time of `req`, drawn when it enters service. Owner thread only.
  virtual uint64_t ServiceNs(const IoRequest& req) = 0;

  Clock& clock() { return clock_; }

  // The forwarding queue's hooks. A subclass that overrides Accept (hv: burns CPU there) calls
  // TimedQueue::Accept to queue the request: its service starts after that.
  void Accept(IoRequest& req) override;
  void AfterSubmit() final { Expire(clock_.Now()); }  // zero service times complete at once
  void OnLowerDone(Forwarded& entry) final;
  void Progress(bool wait) final;
  std::unique_ptr<Forwarded> NewEntry() final { return std::make_unique<Entry>(); }

 private:
  struct Entry : Forwarded {
    uint64_t service = 0;
    uint64_t deadline = 0;  // when the model says it completes
    uint64_t due = 0;       // when it is delivered: the deadline, compensated (DeadlineWaiter)
    bool lower_done = false;
    bool expired = false;
  };
  // In a min-heap by due time. Timers due at the same time fire in the order they were armed,
  // never by address: a simulated run must not depend on where the allocator put an entry.
  struct Timer {
    uint64_t due;
    uint64_t order;
    Entry* entry;
    bool operator>(const Timer& o) const { return due != o.due ? due > o.due : order > o.order; }
  };

  void Start(IoRequest& req, uint64_t now);
  void StartWaiting();
  void Arm(Entry* e, uint64_t start, uint64_t deadline);
  void Expire(uint64_t now);
  // Delivers `e`'s completion at `now`.
  void Deliver(Entry* e, uint64_t now);

  Clock& clock_;
  const TimedQueueOptions options_;
  DeadlineWaiter waiter_{clock_};
  std::vector<Timer> timers_;
  std::deque<IoRequest*> waiting_;  // accepted, waiting for a service slot
  uint32_t in_service_ = 0;
  uint64_t wire_free_ns_ = 0;  // when the bandwidth-capped transfer in progress ends
  uint64_t finished_ = 0;
  uint64_t armed_ = 0;  // timers armed so far: the next one's order
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_EMULATION_TIMED_QUEUE_H_
