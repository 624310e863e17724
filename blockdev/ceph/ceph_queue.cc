#include "blockdev/ceph/ceph_queue.h"

#include "lib/errors.h"

namespace vstack::ceph {

CephQueue::Pending* CephQueue::Start(IoRequest& req, uint32_t pieces) {
  return new Pending{this, &req, pieces + 1};
}

void CephQueue::PieceDone(Pending* p, int rc) {
  if (rc < 0) {
    int none = 0;
    p->rc.compare_exchange_strong(none, rc);
  }
  if (p->left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  CephQueue* q = p->queue;
  IoRequest* req = p->req;
  const int first = p->rc.load();
  delete p;
  // Posted under mu_: the owner may destroy the queue as soon as it sees the completion, and
  // its destructor takes mu_ first, so this thread is done with the queue by then.
  std::lock_guard lock(q->mu_);
  q->PostCompletion(*req, first < 0 ? SystemError(-first) : std::error_code());
  ++q->signals_;
  q->cv_.notify_one();
}

CephQueue::~CephQueue() {
  WaitIdle();
  std::lock_guard lock(mu_);  // the last PieceDone has let go of the queue
}

void CephQueue::DoPoll(bool wait) {
  std::unique_lock lock(mu_);
  if (wait) cv_.wait(lock, [this] { return signals_ > 0; });
  signals_ = 0;
}

}  // namespace vstack::ceph
