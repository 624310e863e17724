// Serving one vstack stack over NBD: everything an NBD server needs to know about vstack (the
// NBD semantics of a stack: block sizes, transmission flags, errno values, per-thread queues,
// block status), and nothing about the server itself, its sockets or its protocol framing.
// `vstack serve` runs nbdkit with a plugin (tools/nbd/nbdkit_plugin.cc) that maps each nbdkit
// callback onto one NbdExport call; a program with an NBD server of its own can do the same.
// The tests drive an NbdExport in-process as well as through real clients.
//
// Threading: an NbdExport is shared by every server thread. The data methods (Read, Write,
// Flush, Trim, Zero, Extents) may be called from any number of threads at once when parallel()
// is true. Each calling thread gets its own IoQueue on its first call (SharedSyncIo,
// lib/shared_sync_io.h); the queue lives in thread-local storage until the thread exits, until
// that thread calls ReleaseThreadQueue(), or until Close(). A stack without thread_safe
// (parallel() false) allows one queue at a time, so the server must run one connection at a
// time on one thread and call ReleaseThreadQueue() when the connection ends.
#ifndef VSTACK_NBD_NBD_EXPORT_H_
#define VSTACK_NBD_NBD_EXPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "lib/block_device.h"
#include "lib/errors.h"
#include "lib/export.h"
#include "lib/extent.h"
#include "lib/shared_sync_io.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::nbd {

// The NBD block size constraints (NBD_INFO_BLOCK_SIZE) a stack asks of its clients.
struct BlockSizes {
  uint32_t minimum = 0;    // the logical block: offsets and lengths must be multiples
  uint32_t preferred = 0;  // smaller writes cost a read-modify-write below (physical block)
  uint32_t maximum = 0;    // largest read or write the server takes in one request
};

// What the export advertises to clients (the NBD transmission flags).
struct ExportFlags {
  bool writable = false;
  bool flush = false;
  bool fua = false;         // FUA on write, trim and zero (native, or write + flush below)
  bool trim = false;
  bool zero = false;        // write-zeroes (native, or emulated with writes of zeros)
  bool fast_zero = false;   // FAST_ZERO is honoured: fails at once where zeroing would write
  bool extents = false;     // block status reports real allocation
  bool multi_conn = false;  // several connections may share the export consistently
};

// The largest read or write advertised as NBD's maximum block size. nbdkit itself refuses
// requests above 64 MiB; 32 MiB is what qemu and libnbd clients use by default.
inline constexpr uint32_t kMaxRequestBytes = 32u << 20;
// The most a single block-status reply describes. Clients ask again from where it ends, so a
// query over a 4 GiB range costs no more than one over this window.
inline constexpr uint64_t kExtentWindow = 1ull << 30;

// The errno an NBD server should send for `ec`: an OS error passes through unchanged; a vstack
// error maps to its portable condition (read-only -> EROFS, not supported -> EOPNOTSUPP, no
// space -> ENOSPC, corruption and checksum mismatches -> EIO, a closing device -> ESHUTDOWN);
// anything else is EIO. Never returns 0 for an error.
int ErrnoFor(std::error_code ec);

class NbdExport {
 public:
  // Opens `spec_or_path` (a stack spec, or an image file whose format is probed; see
  // docs/stack-spec.md). With `read_only` the whole stack is opened read-only.
  static Result<std::unique_ptr<NbdExport>> Open(const std::string& spec_or_path,
                                                 bool read_only);
  // Serves a stack that is already open; `spec` is only used in messages.
  NbdExport(std::string spec, DevicePtr device);
  // Close()s the stack if Close() was not called, ignoring errors.
  ~NbdExport();

  NbdExport(const NbdExport&) = delete;
  NbdExport& operator=(const NbdExport&) = delete;

  // The spec actually opened (for a probed image file, e.g. "vhd+file:/var/tmp/d.vhd").
  const std::string& spec() const { return io_.spec(); }
  BlockDevice& device() const { return io_.device(); }
  uint64_t size() const { return device().geometry().size_bytes; }
  // True if several threads (and so several connections) may call the data methods at once.
  bool parallel() const { return device().Has(kCapThreadSafe); }
  BlockSizes block_sizes() const;
  ExportFlags flags() const;

  // The data path. Each call blocks until the stack completes the request and returns its
  // status. `flags` are vstack IoFlags: kIoFua for Write/Trim/Zero; kIoMayUnmap and kIoFastZero
  // for Zero. A buffer the stack cannot take directly (mem_alignment, e.g. O_DIRECT) goes
  // through a per-thread aligned bounce buffer.
  std::error_code Read(void* buf, uint32_t count, uint64_t offset);
  std::error_code Write(const void* buf, uint32_t count, uint64_t offset, IoFlags flags);
  std::error_code Flush();
  std::error_code Trim(uint32_t count, uint64_t offset, IoFlags flags);
  std::error_code Zero(uint32_t count, uint64_t offset, IoFlags flags);
  // Appends to `out` the allocation of [offset, offset + min(count, kExtentWindow)), clipped
  // to the end of the device, as contiguous extents starting at `offset`.
  Status Extents(uint32_t count, uint64_t offset, std::vector<Extent>* out);

  // Destroys the calling thread's queue, if it has one (the end of a connection on a stack
  // that is not parallel()). Safe to call on any thread at any time it has no call running.
  void ReleaseThreadQueue() { io_.ReleaseThreadQueue(); }

  // Waits for the data methods running on other threads, destroys every thread's queue,
  // flushes the stack (when it is writable) and closes it, which persists its metadata; later
  // data calls fail with Errc::kCancelled. Returns the first error, with a message. Idempotent.
  Status Close() { return io_.Close(); }

 private:
  SharedSyncIo io_;
};

}  // namespace vstack::nbd
VSTACK_PUBLIC_END

#endif  // VSTACK_NBD_NBD_EXPORT_H_
