// Base classes for a device stacked on another one (a transform layer or an image format).
//
// A Layer owns the device below it and closes it after its own DoClose. A LayerQueue owns one
// queue of the device below, opened for the same thread, and by default makes progress by
// polling it. Layers forward Flush only if they choose to: nothing is passed through
// implicitly, because a layer that changes addressing or content must state every operation
// (the lesson of nbdkit's filters and QEMU's is_filter). blockdev/passthrough is the template to
// copy.
#ifndef VSTACK_LIB_LAYER_H_
#define VSTACK_LIB_LAYER_H_

#include <memory>
#include <vector>

#include "lib/block_device.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

class Layer : public BlockDevice {
 public:
  BlockDevice* lower() const override { return lower_.get(); }
  // A layer over a fresh device is fresh (see BlockDevice::fresh).
  bool fresh() const override { return lower_->fresh(); }
  BlockDevice& lower_device() const { return *lower_; }

 protected:
  // Starts with the lower device's geometry and capabilities (except kCapResizable, which a
  // layer claims only if it implements DoResize); a layer that changes them (a format's
  // virtual size, a transform that cannot FUA natively) adjusts them in its constructor with
  // mutable_geometry() and set_capabilities().
  Layer(std::string kind, DevicePtr lower)
      : BlockDevice(std::move(kind), lower->geometry(), lower->capabilities() & ~kCapResizable),
        lower_(std::move(lower)) {}

  // Persists this layer's metadata while the device below is still open. Default: nothing.
  virtual Status CloseLayer() { return OkStatus(); }

 private:
  // CloseLayer(), then Close() the device below. Returns the first error.
  Status DoClose() final;

  DevicePtr lower_;
};

// True if the buffers of a request valid for `upper` suit `lower` too: `lower`'s buffer
// alignment divides `upper`'s. Then a layer over `lower` that forwards `upper`'s reads and
// writes unchanged need not have their buffers walked again (IoQueue re-checks the op, flags,
// range and block alignment, which are cheap and may differ).
bool ForwardedChecksSuffice(const BlockDevice& upper, const BlockDevice& lower);

class LayerQueue : public IoQueue {
 public:
  void RegisterBuffers(std::span<const iovec> buffers) override {
    lower_->RegisterBuffers(buffers);
  }

 protected:
  LayerQueue(BlockDevice& device, std::unique_ptr<IoQueue> lower)
      : IoQueue(device),
        lower_(std::move(lower)),
        forward_checked_(ForwardedChecksSuffice(device, lower_->device())) {}

  IoQueue& lower() { return *lower_; }

  // lower().Submit(batch) for requests that are copies of requests this queue was given (same
  // op, flags, offset, length and buffers: ForwardRequest): when ForwardedChecksSuffice, the
  // queue below does not walk their buffers again, since this queue validated them.
  void SubmitForwarded(std::span<IoRequest* const> batch) {
    lower_->SubmitBatch(batch, forward_checked_);
  }

  // Polls the lower queue; if it has nothing in flight (our requests wait on something else,
  // e.g. another thread's metadata commit), waits through the progress seam (lib/progress.h:
  // a CPU yield, or the simulator's turn to run the other queues) instead of spinning hard.
  void DoPoll(bool wait) override;

 private:
  std::unique_ptr<IoQueue> lower_;
  const bool forward_checked_;
};

// Copies what a layer forwards unchanged: op, flags, offset, length and the data buffers.
// Callback, user_data and status of `to` are left alone.
inline void ForwardRequest(const IoRequest& from, IoRequest* to) {
  to->op = from.op;
  to->flags = from.flags;
  to->offset = from.offset;
  to->length = from.length;
  to->iov = from.iov;
  to->iovcnt = from.iovcnt;
}

// A free list of request wrappers a layer sends down: T must be default-constructible. Objects
// are reused, never freed before the pool. Owner thread only.
template <typename T>
class RequestPool {
 public:
  T* Get() {
    if (free_.empty()) {
      all_.push_back(std::make_unique<T>());
      return all_.back().get();
    }
    T* t = free_.back();
    free_.pop_back();
    return t;
  }
  void Put(T* t) { free_.push_back(t); }

 private:
  std::vector<std::unique_ptr<T>> all_;
  std::vector<T*> free_;
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_LAYER_H_
