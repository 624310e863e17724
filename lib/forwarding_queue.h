// ForwardingQueue: the one queue of every layer that sends each request down as exactly one
// request (leveldb's EnvWrapper idea: forward everything, change only what you must). The
// passthrough and fixed-VHD layers use it as it is; the emulation layers (delay, hv, ready,
// error) and the layers that refuse some requests (the probe guard, the tests' fault layer) are
// small policies over it, through the hooks below. ForwardingLayer (lib/forwarding_layer.h) is
// the device side of the same idea.
//
// A request's life, and the hook that runs at each step (the defaults forward unchanged):
//   1. Submit: BeforeWork() once per call, then Accept(req) for each request of the batch. The
//      default forwards it at once (Forward); a layer may complete it itself (Complete) or keep
//      it and Forward it later (a queue-depth limit).
//   2. Forward(req) copies it (op, flags, offset, length, buffers: ForwardRequest) into a pooled
//      lower request and calls Translate(req, down), which may change the copy (shift the
//      offset, drop a flag) or refuse it: a non-zero error completes `req` with that error and
//      nothing goes down. The lower requests of a call go down in one Submit (one
//      io_uring_submit below), when the hook returns to the base (or at SendForwarded()).
//   3. AfterSubmit() once the batch is below (requests the device below completed inline have
//      gone through step 4 already).
//   4. When a lower request completes, OnLowerDone(entry) runs; the default completes the
//      caller's request with the lower status (Finish). A layer may hold it and Finish later
//      (a deadline).
//   5. Poll: BeforeWork(), then Progress(wait), which by default polls the queue below.
// These hooks are the only places where a forwarding layer's own per-request code runs, all on
// this queue's thread, inside this queue's Submit or Poll; they must not block (except
// deliberately, as ready: stalls its thread).
//
// Cost: entries come from a per-queue free list (no allocation per request once warm). A plain
// ForwardingQueue (this class itself, not a subclass) calls no hook at all, and its requests go
// down with LayerQueue::SubmitForwarded, so the queue below does not check their buffers again.
//
// A layer that needs several lower requests per request (splitting, read-modify-write) derives
// from LayerQueue instead, with PendingParent (lib/parent_completion.h) to complete the caller's
// request when its last piece is done; a layer that maps grains builds on blockdev/grainmap.
#ifndef VSTACK_LIB_FORWARDING_QUEUE_H_
#define VSTACK_LIB_FORWARDING_QUEUE_H_

#include <memory>
#include <span>
#include <system_error>
#include <vector>

#include "lib/export.h"
#include "lib/layer.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

class ForwardingQueue : public LayerQueue {
 public:
  // `device` is the layer this queue belongs to; `lower` a queue of the device below, opened
  // for the same thread.
  ForwardingQueue(BlockDevice& device, std::unique_ptr<IoQueue> lower)
      : LayerQueue(device, std::move(lower)) {}
  ~ForwardingQueue() override;

 protected:
  // One caller's request (`up`) and the request sent below on its behalf (`down`), from
  // Forward until Finish. A layer that keeps state per request derives its own entry from it
  // and returns one from NewEntry; entries are reused, so Forward's caller sets that state.
  struct Forwarded {
    virtual ~Forwarded() = default;
    IoRequest down;
    IoRequest* up = nullptr;

   private:
    friend class ForwardingQueue;
    ForwardingQueue* queue = nullptr;
    Forwarded* next_free = nullptr;
  };

  // ---- The hooks (see the life of a request above). Owner thread only.
  virtual void BeforeWork() {}
  virtual void Accept(IoRequest& req) { Forward(req); }
  virtual std::error_code Translate(const IoRequest& req, IoRequest* down) { return NoError(); }
  virtual void AfterSubmit() {}
  virtual void OnLowerDone(Forwarded& entry) { Finish(entry, entry.down.status); }
  virtual void Progress(bool wait) { LayerQueue::DoPoll(wait); }
  // A new, unused entry; called only when the free list is empty.
  virtual std::unique_ptr<Forwarded> NewEntry() { return std::make_unique<Forwarded>(); }

  // ---- What the hooks use.
  // Sends `req` down as one lower request (step 2). Returns its entry, or nullptr if Translate
  // refused it (then `req` is already completed). The entry's `down` goes below at the end of
  // the running hook's Submit or Poll, or at SendForwarded(): fill in per-request state first.
  Forwarded* Forward(IoRequest& req);
  // Submits what Forward queued now, as one batch. The base does this after every hook call that
  // may forward; a hook calls it to have its requests below before it goes on.
  void SendForwarded();
  // Completes `entry.up` with `status` and recycles the entry (do not touch it afterwards).
  void Finish(Forwarded& entry, std::error_code status) {
    Complete(*entry.up, status);
    Recycle(&entry);
  }

  void DoSubmit(std::span<IoRequest* const> batch) final;
  void DoPoll(bool wait) final;

 private:
  Forwarded* Take() {
    Forwarded* f = free_;
    if (f == nullptr) return TakeNew();
    free_ = f->next_free;
    return f;
  }
  Forwarded* TakeNew();
  void Recycle(Forwarded* f) {
    f->next_free = free_;
    free_ = f;
  }
  // The plain queue's Submit: no hooks, the buffers not checked again below.
  void SubmitPlain(std::span<IoRequest* const> batch);
  // The callbacks of the lower requests.
  static void OnDown(IoRequest& down);
  static void OnDownPlain(IoRequest& down);

  std::vector<std::unique_ptr<Forwarded>> entries_;  // every entry this queue made
  Forwarded* free_ = nullptr;                        // the unused ones
  std::vector<IoRequest*> outgoing_;                 // forwarded, not yet submitted below
  int8_t plain_ = -1;  // this object is a ForwardingQueue itself (no hooks); -1: not known yet
};

// The queue of a layer whose only per-request work is to refuse some requests (error:, the
// probe guard): a ForwardingQueue whose Translate hook asks the layer. `LayerT` has
//   std::error_code Refuse(const IoRequest& req);  // thread-safe; non-zero: refuse with it
// A refused request completes with that error and never reaches the device below.
template <typename LayerT>
class RefusingQueue final : public ForwardingQueue {
 public:
  RefusingQueue(LayerT& layer, std::unique_ptr<IoQueue> lower)
      : ForwardingQueue(layer, std::move(lower)), layer_(layer) {}

 protected:
  std::error_code Translate(const IoRequest& req, IoRequest*) override {
    return layer_.Refuse(req);
  }

 private:
  LayerT& layer_;
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_FORWARDING_QUEUE_H_
