// Blocking I/O on one stack from any number of threads, for programs that call a stack the way
// they call a file: the threads of an NBD server (NbdExport, nbd/nbd_export.h), the threads of
// a Python program (the `vstack` module, docs/python.md).
//
// Threading: every method may be called from any thread. Each calling thread gets its own
// IoQueue on its first call (the contract's one queue per thread, docs/design.md); the queue
// lives in thread-local storage until the thread exits, until that thread calls
// ReleaseThreadQueue(), or until Close(). A stack without kCapThreadSafe allows one queue at a
// time: a second thread's call then fails with OpenQueue's error until the first thread
// releases its queue.
//
// Closing: Close() may run while other threads are inside calls. From its start new calls fail
// with Errc::kCancelled; it waits for the calls already running to return, then destroys every
// thread's queue, flushes a writable stack and closes it.
//
// Buffers: a buffer the stack cannot take directly (its mem_alignment, e.g. O_DIRECT) goes
// through a per-thread aligned bounce buffer; any other buffer is used in place, with no copy.
#ifndef VSTACK_LIB_SHARED_SYNC_IO_H_
#define VSTACK_LIB_SHARED_SYNC_IO_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <system_error>

#include "lib/block_device.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

namespace internal {
struct SharedSyncState;
struct ThreadSlot;
}  // namespace internal

class SharedSyncIo {
 public:
  // Takes over `device`, opened from `spec` (the spec names the stack in messages).
  SharedSyncIo(std::string spec, DevicePtr device);
  // Close()s the stack if Close() was not called, ignoring errors.
  ~SharedSyncIo();

  SharedSyncIo(const SharedSyncIo&) = delete;
  SharedSyncIo& operator=(const SharedSyncIo&) = delete;

  const std::string& spec() const { return spec_; }
  // The stack. Its queries (geometry, Stats, Properties) stay valid until Close().
  BlockDevice& device() const { return *device_; }

  // The data path: each call blocks until the stack completes the request and returns its
  // status (IoQueue's checks: Errc::kOutOfRange, kUnaligned, kReadOnly...; Errc::kCancelled
  // once Close() has started). A zero-length read, write, discard or write-zeroes succeeds
  // without reaching the stack.
  std::error_code Read(uint64_t offset, std::span<std::byte> buf);
  std::error_code Write(uint64_t offset, std::span<const std::byte> buf, IoFlags flags = 0);
  std::error_code Flush();
  std::error_code Discard(uint64_t offset, uint64_t length, IoFlags flags = 0);
  std::error_code WriteZeroes(uint64_t offset, uint64_t length, IoFlags flags = 0);

  // Runs `query` on the stack (Stats, Properties, MapExtents...) as one of these calls, so that
  // Close() waits for it. Once Close() has started it returns Errc::kCancelled and does not run.
  std::error_code Query(const std::function<void(BlockDevice&)>& query);

  // Destroys the calling thread's queue, if it has one (e.g. the end of a connection on a stack
  // without kCapThreadSafe). Safe to call on any thread at any time it has no call running.
  void ReleaseThreadQueue();

  // True once Close() has started.
  bool closing() const;
  // Refuses new calls, waits for the running ones, destroys every thread's queue, flushes the
  // stack (when it is writable) and closes it, which persists its metadata. Returns the first
  // error, with a message. Idempotent: later calls return the first result. Thread-safe.
  Status Close();

 private:
  // The calling thread's slot (with its queue), created on first use.
  Result<internal::ThreadSlot*> Slot();
  std::error_code Run(Op op, std::byte* buf, uint64_t length, uint64_t offset, IoFlags flags);

  std::string spec_;
  DevicePtr device_;
  const uint64_t id_;  // tells this object's thread slots from another's
  // Outlives this object in threads that still hold a slot.
  std::shared_ptr<internal::SharedSyncState> shared_;
  std::mutex close_mu_;  // serialises Close()
  bool closed_ = false;  // guarded by close_mu_
  Status close_status_;  // guarded by close_mu_
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_SHARED_SYNC_IO_H_
