#include "tests/testing/recording_device.h"

#include <algorithm>
#include <cstring>

#include "lib/iovec.h"

namespace vstack::testing {
namespace {

class RecordingQueue final : public LayerQueue {
 public:
  RecordingQueue(RecordingDevice& dev, std::unique_ptr<IoQueue> lower)
      : LayerQueue(dev, std::move(lower)), dev_(dev) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    std::vector<IoRequest*> children;
    for (IoRequest* parent : batch) {
      Child* c = pool_.Get();
      c->parent = parent;
      c->queue = this;
      c->index = dev_.OnSubmit(*parent);
      c->req = IoRequest{};
      ForwardRequest(*parent, &c->req);
      c->req.on_complete = &OnDone;
      c->req.user_data = c;
      children.push_back(&c->req);
    }
    lower().Submit(children);
  }

 private:
  struct Child {
    IoRequest req;
    IoRequest* parent = nullptr;
    RecordingQueue* queue = nullptr;
    uint64_t index = UINT64_MAX;
  };
  static void OnDone(IoRequest& r) {
    Child* c = static_cast<Child*>(r.user_data);
    if (!r.status) c->queue->dev_.OnComplete(c->index);
    c->queue->Complete(*c->parent, r.status);
    c->queue->pool_.Put(c);
  }

  RecordingDevice& dev_;
  RequestPool<Child> pool_;
};

}  // namespace

RecordingDevice::RecordingDevice(DevicePtr lower) : Layer("recording", std::move(lower)) {}

Result<std::unique_ptr<IoQueue>> RecordingDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return std::unique_ptr<IoQueue>(new RecordingQueue(*this, std::move(lower)));
}

uint64_t RecordingDevice::OnSubmit(const IoRequest& r) {
  if (r.op == Op::kRead) return UINT64_MAX;
  RecordedOp op;
  op.op = r.op;
  op.offset = r.offset;
  op.length = r.length;
  if (r.op == Op::kWrite) {
    op.data.resize(r.length);
    CopyFromIov(r.iov, r.iovcnt, 0, op.data.data(), r.length);
  }
  std::lock_guard lock(mu_);
  op.submitted = seq_++;
  log_.push_back(std::move(op));
  return log_.size() - 1;
}

void RecordingDevice::OnComplete(uint64_t index) {
  if (index == UINT64_MAX) return;
  std::lock_guard lock(mu_);
  log_[index].completed = seq_++;
}

std::vector<RecordedOp> RecordingDevice::Log() const {
  std::lock_guard lock(mu_);
  return log_;
}

uint64_t RecordingDevice::events() const {
  std::lock_guard lock(mu_);
  return seq_;
}

std::vector<unsigned char> CrashImage(const std::vector<unsigned char>& base,
                                      const std::vector<RecordedOp>& log, uint64_t crash_point,
                                      Rng* rng) {
  // The newest flush that was submitted and completed before the crash: every write that
  // completed before it was submitted is durable.
  uint64_t barrier = 0;  // writes with completed < barrier are durable
  for (const RecordedOp& op : log) {
    if (op.op == Op::kFlush && op.completed < crash_point) barrier = std::max(barrier, op.submitted);
  }
  std::vector<const RecordedOp*> durable, maybe;
  for (const RecordedOp& op : log) {
    if (op.op == Op::kFlush || op.submitted >= crash_point) continue;
    if (op.completed < barrier) {
      durable.push_back(&op);
    } else {
      maybe.push_back(&op);
    }
  }
  std::sort(durable.begin(), durable.end(),
            [](const RecordedOp* a, const RecordedOp* b) { return a->completed < b->completed; });
  std::vector<unsigned char> img = base;
  auto apply = [&img](const RecordedOp& op, bool discard_zeroes) {
    if (op.offset + op.length > img.size()) img.resize(op.offset + op.length, 0);
    if (op.op == Op::kWrite) {
      std::memcpy(&img[op.offset], op.data.data(), op.length);
    } else if (op.op == Op::kWriteZeroes || discard_zeroes) {
      std::memset(&img[op.offset], 0, op.length);
    }
  };
  for (const RecordedOp* op : durable) apply(*op, rng ? rng->Below(2) : true);
  if (rng) {
    for (size_t i = maybe.size(); i > 1; --i) std::swap(maybe[i - 1], maybe[rng->Below(i)]);
  }
  for (const RecordedOp* op : maybe) {
    if (rng == nullptr || rng->Below(2)) apply(*op, rng ? rng->Below(2) : true);
  }
  return img;
}

}  // namespace vstack::testing
