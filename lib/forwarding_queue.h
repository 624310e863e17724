// ForwardingQueue: the queue of a layer that sends every request down as exactly one request
// (leveldb's EnvWrapper idea: forward everything, change only what you must). It is opt-in:
// Layer and LayerQueue forward nothing implicitly; a layer chooses this queue when each of its
// requests maps to one lower request.
//
// Contract:
//  - DoSubmit builds one lower request per caller's request, a copy of it (op, flags, offset,
//    length, buffers: ForwardRequest), then calls Translate(caller's request, lower request).
//    Translate may change the copy (shift the offset, drop a flag, replace the buffers with ones
//    it owns until completion) or refuse: a non-zero error completes the caller's request with
//    that error and nothing goes down. The default forwards unchanged.
//  - The lower requests of one batch go down in one Submit (one io_uring_submit below).
//  - When a lower request completes, the caller's request completes with its status (after
//    OnLowerDone, which may change it). Callbacks run on this queue's thread, inside the lower
//    queue's Submit or Poll; they must not block.
//  - Wrappers come from a per-queue pool: no allocation per request once warm.
// Per-request cost over a hand-written copy: one virtual call to Translate (and OnLowerDone).
// A plain ForwardingQueue (not a subclass: it has no hooks) calls neither, and its requests go
// down with LayerQueue::SubmitForwarded, so the queue below does not check their buffers again.
//
// A layer that needs several lower requests per request (splitting, read-modify-write) uses
// LayerQueue directly, with PendingParent (lib/parent_completion.h) to complete the caller's
// request when its last piece is done; a layer that maps grains builds on blockdev/grainmap.
#ifndef VSTACK_LIB_FORWARDING_QUEUE_H_
#define VSTACK_LIB_FORWARDING_QUEUE_H_

#include <memory>
#include <span>
#include <system_error>
#include <vector>

#include "lib/layer.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

class ForwardingQueue : public LayerQueue {
 public:
  // `device` is the layer this queue belongs to; `lower` a queue of the device below, opened
  // for the same thread.
  ForwardingQueue(BlockDevice& device, std::unique_ptr<IoQueue> lower)
      : LayerQueue(device, std::move(lower)) {}

 protected:
  // The hook: turns `down` (a copy of `req`) into what the device below must see. Returns an
  // error to complete `req` with instead of forwarding it. The default changes nothing.
  virtual std::error_code Translate(const IoRequest& req, IoRequest* down) { return NoError(); }
  // Runs when `down` has completed on behalf of `req`; returns the status `req` completes with.
  // The default passes the lower status up.
  virtual std::error_code OnLowerDone(const IoRequest& req, const IoRequest& down) {
    return down.status;
  }

  void DoSubmit(std::span<IoRequest* const> batch) final;

 private:
  struct Child {
    IoRequest req;
    IoRequest* parent = nullptr;
    ForwardingQueue* queue = nullptr;
  };
  static void OnChildDone(IoRequest& req);

  RequestPool<Child> pool_;
  std::vector<IoRequest*> children_;
  int8_t plain_ = -1;  // this object is a ForwardingQueue itself (no hooks); -1: not known yet
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_FORWARDING_QUEUE_H_
