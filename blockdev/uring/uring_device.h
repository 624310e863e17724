// uring: a regular file or block device driven through io_uring (liburing), one ring per queue.
//
// Spec: uring:PATH[,direct=on][,entries=256][,fixed_files=on][,fixed_buffers=on] plus the
// file backend's create=, size=, block=, lock= options.
//
// Submit only prepares SQEs and calls io_uring_submit once per batch; completions are reaped
// in Poll (the SPDK bdev_uring shape). When the SQ ring is full, requests wait on a pending
// list and go in at the next Poll, so Submit never blocks. The file is registered with each
// ring (fixed_files); buffers a caller announces with IoQueue::RegisterBuffers become fixed
// buffers (READ_FIXED/WRITE_FIXED) when fixed_buffers is on. Discard and write-zeroes run
// synchronously (fallocate), as io_uring would hand them to a worker thread anyway. Short
// transfers are finished synchronously.
#ifndef VSTACK_BLOCKDEV_URING_URING_DEVICE_H_
#define VSTACK_BLOCKDEV_URING_URING_DEVICE_H_

#include "blockdev/file/file_backed_device.h"

namespace vstack {

struct UringParams {
  unsigned entries = 256;
  bool fixed_files = true;
  bool fixed_buffers = true;
};

class UringDevice final : public FileBackedDevice {
 public:
  UringDevice(const OpenedFile& file, const FileOpenParams& params, UringParams uring)
      : FileBackedDevice("uring", file, params), uring_(uring) {}

  const UringParams& uring_params() const { return uring_; }
  void Properties(PropertyList& out) const override;

  // Checks that io_uring works here and supports what the backend needs; the error says why
  // not and suggests the file backend.
  static Status CheckAvailable();

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;

 private:
  UringParams uring_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_URING_URING_DEVICE_H_
