#include "blockdev/emulation/timed_queue.h"

#include <algorithm>
#include <functional>

#include "lib/progress.h"

namespace vstack {
namespace {
enum TimedCounter { kServiceNs, kLateNs, kEarlyNs, kWaitedForSlot };
// The compensation class of a request (DeadlineWaiter): reads, everything else.
size_t ClassOf(const IoRequest& req) { return req.op == Op::kRead ? 0 : 1; }
}  // namespace

void TimedQueue::Accept(IoRequest& req) {
  if (options_.max_in_service != 0 && in_service_ >= options_.max_in_service) {
    waiting_.push_back(&req);
    Count(kWaitedForSlot);
  } else {
    Start(req, clock_.Now());
  }
}

void TimedQueue::Start(IoRequest& req, uint64_t now) {
  Entry* e = static_cast<Entry*>(Forward(req));  // never refused: no Translate
  e->lower_done = e->expired = false;
  e->service = ServiceNs(req);
  Count(kServiceNs, e->service);
  if (!options_.after_lower) {
    uint64_t deadline = now + e->service;
    if (options_.bytes_per_s != 0 && (req.op == Op::kRead || req.op == Op::kWrite)) {
      const uint64_t transfer =
          static_cast<uint64_t>(double(req.length) * 1e9 / double(options_.bytes_per_s));
      wire_free_ns_ = std::max(wire_free_ns_, now) + transfer;
      deadline = std::max(deadline, wire_free_ns_);
    }
    Arm(e, now, deadline);
  }
  ++in_service_;
}

void TimedQueue::Arm(Entry* e, uint64_t start, uint64_t deadline) {
  e->deadline = deadline;
  e->due = waiter_.DueTime(start, deadline, ClassOf(*e->up));
  timers_.push_back({e->due, armed_++, e});
  std::push_heap(timers_.begin(), timers_.end(), std::greater<>());
}

void TimedQueue::OnLowerDone(Forwarded& entry) {
  Entry* e = static_cast<Entry*>(&entry);
  e->lower_done = true;
  if (options_.after_lower) {
    const uint64_t now = clock_.Now();
    Arm(e, now, now + e->service);
  } else if (e->expired) {
    Deliver(e, clock_.Now());
  }
}

void TimedQueue::Expire(uint64_t now) {
  // Of the completions the timer delivers now, per class, for the compensation.
  double error_ns[DeadlineWaiter::kClasses] = {};
  uint64_t delivered[DeadlineWaiter::kClasses] = {};
  while (!timers_.empty() && timers_.front().due <= now) {
    std::pop_heap(timers_.begin(), timers_.end(), std::greater<>());
    Entry* e = timers_.back().entry;
    timers_.pop_back();
    e->expired = true;
    if (e->lower_done) {
      const size_t cls = ClassOf(*e->up);
      error_ns[cls] += double(now) - double(e->deadline);
      ++delivered[cls];
      Deliver(e, now);
    }
  }
  for (size_t cls = 0; cls < DeadlineWaiter::kClasses; ++cls) {
    waiter_.Delivered(error_ns[cls], delivered[cls], cls);
  }
}

void TimedQueue::Deliver(Entry* e, uint64_t now) {
  if (now > e->deadline) Count(kLateNs, now - e->deadline);
  if (now < e->deadline) Count(kEarlyNs, e->deadline - now);
  Finish(*e, e->down.status);
  --in_service_;
  ++finished_;
  StartWaiting();
}

void TimedQueue::StartWaiting() {
  if (waiting_.empty()) return;
  const uint64_t now = clock_.Now();
  while (!waiting_.empty() && in_service_ < options_.max_in_service) {
    IoRequest* req = waiting_.front();
    waiting_.pop_front();
    Start(*req, now);
  }
  SendForwarded();
}

void TimedQueue::Progress(bool wait) {
  const uint64_t before = finished_;
  lower().Poll(0);
  Expire(clock_.Now());
  if (!wait || finished_ != before) return;
  if (lower().in_flight() > 0) {
    // A lower request is still running: its completion is what we wait for first.
    lower().Poll(1);
  } else if (!timers_.empty()) {
    waiter_.WaitUntil(timers_.front().due);
  } else {
    WaitForProgress("a timed layer's requests wait for another queue");
  }
  Expire(clock_.Now());
}

}  // namespace vstack
