#include "blockdev/uring/uring_device.h"

#include <liburing.h>

#include <climits>
#include <cstring>
#include <deque>

#include "lib/iovec.h"

namespace vstack {
namespace {

// Creates a ring, preferring cooperative task running (fewer interrupts) where the kernel has it.
int InitRing(unsigned entries, io_uring* ring) {
  int rc = io_uring_queue_init(entries, ring, IORING_SETUP_COOP_TASKRUN);
  if (rc == -EINVAL) rc = io_uring_queue_init(entries, ring, 0);
  return rc;
}

class UringQueue final : public IoQueue {
 public:
  static Result<std::unique_ptr<IoQueue>> Create(UringDevice& dev) {
    std::unique_ptr<UringQueue> q(new UringQueue(dev));
    const int rc = InitRing(dev.uring_params().entries, &q->ring_);
    if (rc < 0) {
      return MakeError(SystemError(-rc), "uring: io_uring_queue_init(" +
                                             std::to_string(dev.uring_params().entries) +
                                             "): " + std::strerror(-rc));
    }
    q->ring_ok_ = true;
    q->fd_ = dev.fd();
    if (dev.uring_params().fixed_files && io_uring_register_files(&q->ring_, &q->fd_, 1) == 0) {
      q->fd_ = 0;  // index into the registered file table
      q->sqe_flags_ = IOSQE_FIXED_FILE;
    }
    return std::unique_ptr<IoQueue>(std::move(q));
  }

  ~UringQueue() override {
    WaitIdle();
    if (ring_ok_) io_uring_queue_exit(&ring_);
  }

  void RegisterBuffers(std::span<const iovec> buffers) override {
    if (!dev_.uring_params().fixed_buffers || !buffers_.empty() || buffers.empty()) return;
    if (io_uring_register_buffers(&ring_, buffers.data(), static_cast<unsigned>(buffers.size())) == 0) {
      buffers_.assign(buffers.begin(), buffers.end());
    }
  }

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    for (IoRequest* r : batch) {
      if (IsWriteType(r->op)) {
        if (std::error_code ec = dev_.BeforeWrite()) {
          Complete(*r, ec);
          continue;
        }
      }
      if (r->op == Op::kDiscard || r->op == Op::kWriteZeroes || r->iovcnt > IOV_MAX) {
        Complete(*r, dev_.RunSync(*r));
        continue;
      }
      if (!pending_.empty() || !Prepare(r)) pending_.push_back(r);
    }
    SubmitPrepared(false);
  }

  void DoPoll(bool wait) override {
    unsigned reaped = Reap();
    FillFromPending();
    if (wait && reaped == 0 && in_kernel_ + io_uring_sq_ready(&ring_) > 0) {
      SubmitPrepared(true);
      Reap();
      FillFromPending();
    }
    SubmitPrepared(false);
  }

 private:
  explicit UringQueue(UringDevice& dev) : IoQueue(dev), dev_(dev) {}

  int FindBuffer(const void* p, size_t len) const {
    const char* c = static_cast<const char*>(p);
    for (size_t i = 0; i < buffers_.size(); ++i) {
      const char* base = static_cast<const char*>(buffers_[i].iov_base);
      if (c >= base && c + len <= base + buffers_[i].iov_len) return static_cast<int>(i);
    }
    return -1;
  }

  // Prepares one SQE for `r`; false when the SQ ring is full.
  bool Prepare(IoRequest* r) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return false;
    const bool single = r->iovcnt == 1;
    void* base = single ? r->iov[0].iov_base : nullptr;
    const unsigned len = single ? static_cast<unsigned>(r->iov[0].iov_len) : 0;
    const int buf = single ? FindBuffer(base, len) : -1;
    switch (r->op) {
      case Op::kRead:
        if (buf >= 0) {
          io_uring_prep_read_fixed(sqe, fd_, base, len, r->offset, buf);
        } else if (single) {
          io_uring_prep_read(sqe, fd_, base, len, r->offset);
        } else {
          io_uring_prep_readv(sqe, fd_, r->iov, r->iovcnt, r->offset);
        }
        break;
      case Op::kWrite:
        if (buf >= 0) {
          io_uring_prep_write_fixed(sqe, fd_, base, len, r->offset, buf);
        } else if (single) {
          io_uring_prep_write(sqe, fd_, base, len, r->offset);
        } else {
          io_uring_prep_writev(sqe, fd_, r->iov, r->iovcnt, r->offset);
        }
        if (r->flags & kIoFua) sqe->rw_flags = RWF_DSYNC;
        break;
      case Op::kFlush:
        io_uring_prep_fsync(sqe, fd_, IORING_FSYNC_DATASYNC);
        break;
      default:
        break;  // discard and write-zeroes never get here
    }
    sqe->flags |= sqe_flags_;
    io_uring_sqe_set_data(sqe, r);
    return true;
  }

  void FillFromPending() {
    while (!pending_.empty() && Prepare(pending_.front())) pending_.pop_front();
  }

  void SubmitPrepared(bool wait) {
    if (io_uring_sq_ready(&ring_) == 0 && !wait) return;
    int n;
    do {
      n = wait ? io_uring_submit_and_wait(&ring_, 1) : io_uring_submit(&ring_);
    } while (n == -EINTR);
    if (n > 0) in_kernel_ += static_cast<unsigned>(n);
    // On -EAGAIN/-EBUSY the SQEs stay in the ring and go in at the next call.
  }

  unsigned Reap() {
    io_uring_cqe* cqe;
    unsigned head, count = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      Finish(*static_cast<IoRequest*>(io_uring_cqe_get_data(cqe)), cqe->res);
      ++count;
    }
    io_uring_cq_advance(&ring_, count);
    in_kernel_ -= count;
    return count;
  }

  void Finish(IoRequest& r, int res) {
    if (res < 0) {
      Complete(r, SystemError(-res));
      return;
    }
    const uint64_t done = static_cast<uint64_t>(res);
    if ((r.op == Op::kRead || r.op == Op::kWrite) && done < r.length) {
      // Short transfer (end of file, signal): finish the rest synchronously.
      std::vector<iovec> rest;
      IovSlice(r.iov, r.iovcnt, done, r.length - done, &rest);
      const uint32_t cnt = static_cast<uint32_t>(rest.size());
      Complete(r, r.op == Op::kRead
                      ? dev_.ReadSync(r.offset + done, rest.data(), cnt)
                      : dev_.WriteSync(r.offset + done, rest.data(), cnt, r.flags & kIoFua));
      return;
    }
    Complete(r, {});
  }

  UringDevice& dev_;
  io_uring ring_{};
  bool ring_ok_ = false;
  int fd_ = -1;
  unsigned sqe_flags_ = 0;
  unsigned in_kernel_ = 0;  // submitted SQEs not yet reaped
  std::deque<IoRequest*> pending_;  // waiting for SQ space
  std::vector<iovec> buffers_;      // registered fixed buffers
};

ComponentInfo UringComponent() {
  auto open_uring = [](const OptionValues& o, const OpenOptions& open) -> Result<DevicePtr> {
    VSTACK_ASSIGN_OR_RETURN(FileOpenParams params, ParseFileParams(o, open));
    UringParams up;
    VSTACK_ASSIGN_OR_RETURN(int64_t entries, o.Int("entries", 8, 4096));
    up.entries = static_cast<unsigned>(entries);
    VSTACK_ASSIGN_OR_RETURN(up.fixed_files, o.Bool("fixed_files"));
    VSTACK_ASSIGN_OR_RETURN(up.fixed_buffers, o.Bool("fixed_buffers"));
    VSTACK_RETURN_IF_ERROR(UringDevice::CheckAvailable());
    VSTACK_ASSIGN_OR_RETURN(OpenedFile file, OpenBackingFile("uring", params));
    return MakeDevice<UringDevice>(file, params, up);
  };
  return BackendComponent(
      "uring", "regular file or block device via io_uring, one ring per queue", "PATH",
      JoinOptions(FileOptionInfos(),
                  {{"entries", "submission ring size per queue (8..4096)", "256"},
                   {"fixed_files", "register the file with each ring", "on"},
                   {"fixed_buffers", "use registered buffers announced by the caller", "on"}}),
      open_uring);
}

}  // namespace

Status UringDevice::CheckAvailable() {
  io_uring ring;
  const int rc = InitRing(4, &ring);
  if (rc < 0) {
    return MakeError(SystemError(-rc), std::string("uring: io_uring is not available here "
                                                   "(io_uring_queue_init: ") +
                                           std::strerror(-rc) + "); use the file backend instead");
  }
  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  std::string missing;
  if (probe) {
    for (int op : {IORING_OP_READV, IORING_OP_WRITEV, IORING_OP_FSYNC, IORING_OP_READ,
                   IORING_OP_WRITE, IORING_OP_READ_FIXED, IORING_OP_WRITE_FIXED}) {
      if (!io_uring_opcode_supported(probe, op)) missing += " " + std::to_string(op);
    }
    io_uring_free_probe(probe);
  }
  io_uring_queue_exit(&ring);
  if (!missing.empty()) {
    return MakeError(Errc::kNotSupported, "uring: this kernel's io_uring lacks opcodes" + missing +
                                              "; use the file backend instead");
  }
  return OkStatus();
}

void UringDevice::Properties(PropertyList& out) const {
  FileBackedDevice::Properties(out);
  out.push_back({"ring_entries", static_cast<uint64_t>(uring_.entries), ""});
  out.push_back({"fixed_files", uring_.fixed_files, ""});
  out.push_back({"fixed_buffers", uring_.fixed_buffers, ""});
}

Result<std::unique_ptr<IoQueue>> UringDevice::DoOpenQueue() { return UringQueue::Create(*this); }

VSTACK_REGISTER_COMPONENT(uring, UringComponent());

}  // namespace vstack
