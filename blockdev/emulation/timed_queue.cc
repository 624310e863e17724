#include "blockdev/emulation/timed_queue.h"

#include <algorithm>
#include <functional>
#include <thread>

namespace vstack {

void TimedQueue::DoSubmit(std::span<IoRequest* const> batch) {
  std::vector<IoRequest*> children;
  children.swap(children_);  // reentrancy-safe reuse of the vector's capacity
  for (IoRequest* parent : batch) {
    OnAccepted(*parent);  // may spend CPU time: service starts after it
    if (options_.max_in_service != 0 && in_service_ >= options_.max_in_service) {
      waiting_.push_back(parent);
      Count(2);
    } else {
      Start(parent, clock_.Now(), children);
    }
  }
  if (!children.empty()) lower().Submit(children);
  children.clear();
  children_.swap(children);
  Expire(clock_.Now());  // zero service times complete at once
}

void TimedQueue::Start(IoRequest* parent, uint64_t now, std::vector<IoRequest*>& out) {
  Entry* e = pool_.Get();
  e->parent = parent;
  e->queue = this;
  e->lower_done = e->expired = false;
  const uint64_t service = ServiceNs(*parent);
  Count(0, service);
  e->deadline = now + service;
  if (options_.bytes_per_s != 0 && (parent->op == Op::kRead || parent->op == Op::kWrite)) {
    const uint64_t transfer =
        static_cast<uint64_t>(double(parent->length) * 1e9 / double(options_.bytes_per_s));
    wire_free_ns_ = std::max(wire_free_ns_, now) + transfer;
    e->deadline = std::max(e->deadline, wire_free_ns_);
  }
  ++in_service_;
  timers_.emplace_back(e->deadline, e);
  std::push_heap(timers_.begin(), timers_.end(), std::greater<>());
  ForwardRequest(*parent, &e->req);
  e->req.on_complete = &TimedQueue::OnLowerDone;
  e->req.user_data = e;
  out.push_back(&e->req);
}

void TimedQueue::OnLowerDone(IoRequest& req) {
  Entry* e = static_cast<Entry*>(req.user_data);
  e->lower_done = true;
  if (e->expired) e->queue->Finish(e);
}

void TimedQueue::Expire(uint64_t now) {
  while (!timers_.empty() && timers_.front().first <= now) {
    std::pop_heap(timers_.begin(), timers_.end(), std::greater<>());
    Entry* e = timers_.back().second;
    timers_.pop_back();
    e->expired = true;
    if (e->lower_done) Finish(e);
  }
}

void TimedQueue::Finish(Entry* e) {
  const uint64_t now = clock_.Now();
  if (now > e->deadline) Count(1, now - e->deadline);
  Complete(*e->parent, e->req.status);
  pool_.Put(e);
  --in_service_;
  ++finished_;
  StartWaiting();
}

void TimedQueue::StartWaiting() {
  if (waiting_.empty()) return;
  std::vector<IoRequest*> children;
  const uint64_t now = clock_.Now();
  while (!waiting_.empty() && in_service_ < options_.max_in_service) {
    IoRequest* parent = waiting_.front();
    waiting_.pop_front();
    Start(parent, now, children);
  }
  if (!children.empty()) lower().Submit(children);
}

void TimedQueue::DoPoll(bool wait) {
  const uint64_t before = finished_;
  lower().Poll(0);
  Expire(clock_.Now());
  if (!wait || finished_ != before) return;
  if (lower().in_flight() > 0) {
    // A lower request is still running: its completion is what we wait for first.
    lower().Poll(1);
  } else if (!timers_.empty()) {
    clock_.SleepUntil(timers_.front().first);
  } else {
    std::this_thread::yield();
  }
  Expire(clock_.Now());
}

}  // namespace vstack
