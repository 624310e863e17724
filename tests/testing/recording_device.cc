#include "tests/testing/recording_device.h"

#include <algorithm>
#include <cstring>

#include "lib/iovec.h"

namespace vstack::testing {
namespace {

// A forwarding queue that logs each request as it goes down and each completion as it is
// reported above, possibly deferred and reordered (defer_completions).
class RecordingQueue final : public ForwardingQueue {
 public:
  RecordingQueue(RecordingDevice& dev, std::unique_ptr<IoQueue> lower)
      : ForwardingQueue(dev, std::move(lower)), dev_(dev) {}

 protected:
  void Accept(IoRequest& req) override {
    const uint64_t index = dev_.OnSubmit(req);
    static_cast<Entry*>(Forward(req))->index = index;  // never refused: no Translate
  }

  void OnLowerDone(Forwarded& entry) override {
    Entry* e = static_cast<Entry*>(&entry);
    if (dev_.defer_completions()) {
      deferred_.push_back(e);
      return;
    }
    Report(e);
  }

  void Progress(bool wait) override {
    ForwardingQueue::Progress(wait && deferred_.empty());
    // A blocking poll always makes progress; a non-blocking one only sometimes.
    if (deferred_.empty() || (!wait && order_.Below(2) == 0)) return;
    std::swap(deferred_[order_.Below(deferred_.size())], deferred_.back());
    Entry* e = deferred_.back();
    deferred_.pop_back();
    Report(e);
  }

  std::unique_ptr<Forwarded> NewEntry() override { return std::make_unique<Entry>(); }

 private:
  struct Entry : Forwarded {
    uint64_t index = UINT64_MAX;
  };
  void Report(Entry* e) {
    if (!e->down.status) dev_.OnComplete(e->index);
    Finish(*e, e->down.status);
  }

  RecordingDevice& dev_;
  std::vector<Entry*> deferred_;  // completed below, not yet reported (defer_completions)
  Rng order_{7};                  // which deferred request completes next
};

}  // namespace

RecordingDevice::RecordingDevice(DevicePtr lower, bool defer_completions)
    : ForwardingLayer("recording", std::move(lower)), defer_(defer_completions) {}

std::unique_ptr<ForwardingQueue> RecordingDevice::NewQueue(std::unique_ptr<IoQueue> lower) {
  return std::make_unique<RecordingQueue>(*this, std::move(lower));
}

uint64_t RecordingDevice::OnSubmit(const IoRequest& r) {
  if (r.op == Op::kRead) return UINT64_MAX;
  RecordedOp op;
  op.op = r.op;
  op.flags = r.flags;
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

namespace {

// CrashImage, or with `maybe_too` false DurableImage.
std::vector<unsigned char> BuildCrashImage(const std::vector<unsigned char>& base,
                                           const std::vector<RecordedOp>& log,
                                           uint64_t crash_point, Rng* rng, uint32_t tear,
                                           bool maybe_too) {
  // The newest flush that was submitted and completed before the crash: every write that
  // completed before it was submitted is durable.
  uint64_t barrier = 0;  // writes with completed < barrier are durable
  for (const RecordedOp& op : log) {
    if (op.op == Op::kFlush && op.completed < crash_point) barrier = std::max(barrier, op.submitted);
  }
  std::vector<const RecordedOp*> durable, maybe;
  for (const RecordedOp& op : log) {
    if (op.op == Op::kFlush || op.submitted >= crash_point) continue;
    if (op.completed < barrier || ((op.flags & kIoFua) && op.completed < crash_point)) {
      durable.push_back(&op);
    } else {
      maybe.push_back(&op);
    }
  }
  std::sort(durable.begin(), durable.end(),
            [](const RecordedOp* a, const RecordedOp* b) { return a->completed < b->completed; });
  std::vector<unsigned char> img = base;
  // Applies [from, to) of `op` (offsets relative to it).
  auto apply_part = [&img](const RecordedOp& op, bool discard_zeroes, uint64_t from, uint64_t to) {
    if (op.offset + to > img.size()) img.resize(op.offset + to, 0);
    if (op.op == Op::kWrite) {
      std::memcpy(&img[op.offset + from], op.data.data() + from, to - from);
    } else if (op.op == Op::kWriteZeroes || discard_zeroes) {
      std::memset(&img[op.offset + from], 0, to - from);
    }
  };
  auto apply = [&](const RecordedOp& op, bool discard_zeroes) {
    apply_part(op, discard_zeroes, 0, op.length);
  };
  // A torn landing: every sector of `tear` bytes (aligned on the device) lands or not.
  auto apply_torn = [&](const RecordedOp& op, bool discard_zeroes) {
    for (uint64_t at = 0; at < op.length;) {
      const uint64_t end =
          std::min<uint64_t>(op.length, (op.offset + at) / tear * tear + tear - op.offset);
      if (rng->Below(2)) apply_part(op, discard_zeroes, at, end);
      at = end;
    }
  };
  for (const RecordedOp* op : durable) apply(*op, rng ? rng->Below(2) : true);
  if (!maybe_too) return img;
  if (rng) {
    for (size_t i = maybe.size(); i > 1; --i) std::swap(maybe[i - 1], maybe[rng->Below(i)]);
  }
  // Newer data wins: a write that completed before an overlapping durable write was submitted
  // cannot land after it.
  auto superseded = [&durable](const RecordedOp& m) {
    return std::any_of(durable.begin(), durable.end(), [&m](const RecordedOp* d) {
      return d->submitted > m.completed && d->offset < m.offset + m.length &&
             m.offset < d->offset + d->length;
    });
  };
  for (const RecordedOp* op : maybe) {
    if (superseded(*op)) continue;
    if (rng != nullptr && tear != 0 && rng->Below(2)) {
      apply_torn(*op, rng->Below(2));
    } else if (rng == nullptr || rng->Below(2)) {
      apply(*op, rng ? rng->Below(2) : true);
    }
  }
  return img;
}

}  // namespace

std::vector<unsigned char> CrashImage(const std::vector<unsigned char>& base,
                                      const std::vector<RecordedOp>& log, uint64_t crash_point,
                                      Rng* rng, uint32_t tear) {
  return BuildCrashImage(base, log, crash_point, rng, tear, /*maybe_too=*/true);
}

std::vector<unsigned char> DurableImage(const std::vector<unsigned char>& base,
                                        const std::vector<RecordedOp>& log, uint64_t crash_point) {
  return BuildCrashImage(base, log, crash_point, nullptr, 0, /*maybe_too=*/false);
}

}  // namespace vstack::testing
