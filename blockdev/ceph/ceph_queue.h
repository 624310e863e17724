// CephQueue: the IoQueue shape of the rbd: and rados: backends. Requests go to librbd/librados
// as asynchronous operations in Submit; their callbacks run on librados's own threads and hand
// each finished request back with PostCompletion, so its callback runs on the queue's thread
// inside a later Poll, as the IoQueue contract requires. Poll(min>0) sleeps on a condition
// variable until a callback arrives (no busy polling).
#ifndef VSTACK_BLOCKDEV_CEPH_CEPH_QUEUE_H_
#define VSTACK_BLOCKDEV_CEPH_CEPH_QUEUE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "lib/block_device.h"

namespace vstack::ceph {

class CephQueue : public IoQueue {
 public:
  ~CephQueue() override;

  // One request in flight as `pieces` asynchronous operations (rados: splits at object
  // boundaries; rbd: one piece). Owned by the queue from Start until the last PieceDone.
  struct Pending {
    CephQueue* queue;
    IoRequest* req;
    std::atomic<uint32_t> left;
    std::atomic<int> rc{0};  // the first error (negative errno), else 0
  };

  // Call before issuing the pieces of `req`; then call Issued() once all are issued, so the
  // request cannot complete while pieces are still being started.
  Pending* Start(IoRequest& req, uint32_t pieces);
  static void Issued(Pending* p) { PieceDone(p, 0); }
  // One piece finished with `rc` (>= 0 success, < 0 errno). Any thread.
  static void PieceDone(Pending* p, int rc);

 protected:
  explicit CephQueue(BlockDevice& device) : IoQueue(device) {}
  void DoPoll(bool wait) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t signals_ = 0;  // completions posted since the last wait; guarded by mu_
};

}  // namespace vstack::ceph

#endif  // VSTACK_BLOCKDEV_CEPH_CEPH_QUEUE_H_
