// Blocking I/O helpers for tools and tests, built on Submit + Poll. Not for hot paths: each call
// submits one request and polls until it completes.
//
// SyncIo opens one queue on first use and keeps it; use one SyncIo per thread. Destroy it
// before closing the device.
#ifndef VSTACK_LIB_SYNC_IO_H_
#define VSTACK_LIB_SYNC_IO_H_

#include <cstddef>
#include <memory>
#include <span>
#include <system_error>

#include "lib/block_device.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// Submits `req` to `queue` and polls until it completes. Returns req.status.
std::error_code Execute(IoQueue& queue, IoRequest& req);

class SyncIo {
 public:
  explicit SyncIo(BlockDevice& device) : device_(device) {}

  std::error_code Read(uint64_t offset, std::span<std::byte> buf);
  std::error_code ReadV(uint64_t offset, std::span<const iovec> iov);
  std::error_code Write(uint64_t offset, std::span<const std::byte> buf, IoFlags flags = 0);
  std::error_code WriteV(uint64_t offset, std::span<const iovec> iov, IoFlags flags = 0);
  std::error_code Flush();
  std::error_code Discard(uint64_t offset, uint64_t length);
  std::error_code WriteZeroes(uint64_t offset, uint64_t length, IoFlags flags = 0);
  // Runs any request (its callback field is ignored).
  std::error_code Run(IoRequest& req);

  // The queue, opened on first use; nullptr if opening failed (see open_error()).
  IoQueue* queue();
  const Error& open_error() const { return open_error_; }

 private:
  BlockDevice& device_;
  std::unique_ptr<IoQueue> queue_;
  Error open_error_;
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_SYNC_IO_H_
