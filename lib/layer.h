// Base classes for a device stacked on another one (a transform layer or an image format).
//
// A Layer owns the device below it and closes it after its own DoClose. A LayerQueue owns one
// queue of the device below, opened for the same thread, and by default makes progress by
// polling it. Nothing is passed through implicitly: a Layer forwards no operation, query or
// capability it does not state, because a layer that changes addressing or content (an image
// format, a transform that maps, compresses or checksums) and forwards something it does not
// understand describes or corrupts the wrong bytes (the lesson of nbdkit's filters and QEMU's
// is_filter). Such a layer derives from Layer and states every operation.
//
// Forwarding by default is for layers that preserve data (same addresses, same bytes): they
// derive from ForwardingLayer (lib/forwarding_layer.h) and override only what they change;
// blockdev/passthrough is the template. A layer that sends each request down as one request
// uses ForwardingQueue (lib/forwarding_queue.h) whichever base it has; one that maps grains
// builds on blockdev/grainmap.
#ifndef VSTACK_LIB_LAYER_H_
#define VSTACK_LIB_LAYER_H_

#include <cstddef>
#include <cstring>
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
  // Never blocks (below or through the seam) once a request of this queue has completed
  // meanwhile (has_completions(): a derived DoPoll finished deferred work before calling it).
  void DoPoll(bool wait) override;

 private:
  std::unique_ptr<IoQueue> lower_;
  const bool forward_checked_;
};

// Copies what a layer forwards unchanged: op, flags, offset, length and the data buffers.
// Callback, user_data and status of `to` are left alone. Those fields lead IoRequest: they are
// copied as one block (the padding between them included), the cheapest copy per level.
inline void ForwardRequest(const IoRequest& from, IoRequest* to) {
  constexpr size_t kForwardedBytes = offsetof(IoRequest, on_complete);
  static_assert(offsetof(IoRequest, op) == 0 && offsetof(IoRequest, flags) < kForwardedBytes &&
                offsetof(IoRequest, offset) < kForwardedBytes &&
                offsetof(IoRequest, length) < kForwardedBytes &&
                offsetof(IoRequest, iov) < kForwardedBytes &&
                offsetof(IoRequest, iovcnt) < kForwardedBytes);
  std::memcpy(static_cast<void*>(to), &from, kForwardedBytes);
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
