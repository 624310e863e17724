// file: a regular file or block device driven with synchronous preadv/pwritev2. Every request
// completes inside Submit; concurrency comes from several threads, each with its own queue.
//
// Spec: file:PATH[,direct=on][,create=on,size=N][,block=512|4096][,lock=off]
//
// Flush is fdatasync; FUA is pwritev2(RWF_DSYNC); discard punches a hole (BLKDISCARD on a block
// device); write-zeroes uses fallocate(ZERO_RANGE), falling back to a hole, then to writing
// zeros.
#ifndef VSTACK_BLOCKDEV_FILE_FILE_DEVICE_H_
#define VSTACK_BLOCKDEV_FILE_FILE_DEVICE_H_

#include "blockdev/file/file_backed_device.h"

namespace vstack {

class FileDevice final : public FileBackedDevice {
 public:
  FileDevice(const OpenedFile& file, const FileOpenParams& params)
      : FileBackedDevice("file", file, params) {}

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_FILE_FILE_DEVICE_H_
