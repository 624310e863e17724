// Blocking I/O helpers for tools and tests, built on Submit + Poll. Not for hot paths: each call
// submits one request and polls until it completes.
//
// SyncIo opens one queue on first use and keeps it; use one SyncIo per thread. Destroy it
// before closing the device.
#ifndef VSTACK_LIB_SYNC_IO_H_
#define VSTACK_LIB_SYNC_IO_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

#include "lib/block_device.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// Submits `req` to `queue` and polls until it completes. Returns req.status.
std::error_code Execute(IoQueue& queue, IoRequest& req);

// Where a failed read failed: the lowest offset found failing, and the error of that read.
struct FailedRead {
  uint64_t offset = 0;
  std::error_code error;
};

// After a read of [offset, offset + buf.size()) through `queue` (of a device of `geometry`)
// failed with `error`: the lowest offset in that range whose read fails again, and that read's
// error. The range is read again in halves, the lower half first, one request at a time into
// `buf`, down to pieces of one block (the logical block, or the memory alignment if larger), so
// a chunk with one bad grain names that grain's first block. If neither half of a piece fails
// again (an error that does not repeat), the piece's offset and the last error seen. For error
// paths only: it costs up to two reads per halving. REQUIRES: the read was valid (aligned as
// `geometry` asks) and `queue` has nothing in flight.
FailedRead LowestFailedRead(IoQueue& queue, const Geometry& geometry, uint64_t offset,
                            std::span<std::byte> buf, std::error_code error);

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
  // After Read(offset, buf) failed with `error`: where in that range it fails, as the free
  // LowestFailedRead above (through this queue; `offset` and `error` when it never opened).
  FailedRead LowestFailedRead(uint64_t offset, std::span<std::byte> buf, std::error_code error);

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
