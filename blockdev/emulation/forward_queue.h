// ForwardQueue: a LayerQueue that forwards each request unchanged to the lower queue (one child
// per parent, completed with the child's status), with two hooks for the emulation layers:
// Intercept() may complete a request itself instead (error:), and BeforeWork() runs at the top
// of every Submit and Poll (ready: stalls the thread there). The forwarding is the template's
// (blockdev/passthrough) and is kept here, in one place, so it can move onto a shared lib/
// helper later.
#ifndef VSTACK_BLOCKDEV_EMULATION_FORWARD_QUEUE_H_
#define VSTACK_BLOCKDEV_EMULATION_FORWARD_QUEUE_H_

#include <vector>

#include "lib/layer.h"

namespace vstack {

class ForwardQueue : public LayerQueue {
 protected:
  ForwardQueue(BlockDevice& device, std::unique_ptr<IoQueue> lower)
      : LayerQueue(device, std::move(lower)) {}

  // Returns true if it completed `req` itself (with Complete()); the request is then not
  // forwarded. Default: forward everything.
  virtual bool Intercept(IoRequest& req) { return false; }
  // Runs first in every DoSubmit and DoPoll, on the queue's thread. Default: nothing.
  virtual void BeforeWork() {}

  void DoSubmit(std::span<IoRequest* const> batch) final;
  void DoPoll(bool wait) final;

 private:
  struct Child {
    IoRequest req;
    IoRequest* parent = nullptr;
    ForwardQueue* queue = nullptr;
  };
  static void OnLowerDone(IoRequest& req);

  RequestPool<Child> pool_;
  std::vector<IoRequest*> children_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_EMULATION_FORWARD_QUEUE_H_
