// A single I/O request as it travels through a queue. The caller owns the request and its
// buffers until the completion callback has run.
#ifndef VSTACK_LIB_IO_REQUEST_H_
#define VSTACK_LIB_IO_REQUEST_H_

#include <sys/uio.h>

#include <cstdint>
#include <string_view>
#include <system_error>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

struct CpuAccount;  // lib/cpu_account.h

enum class Op : uint8_t { kRead, kWrite, kFlush, kDiscard, kWriteZeroes };
inline constexpr int kOpCount = 5;
// The deepest stack whose per-layer self times a request carries (lib/stats.h, PathStats);
// levels are counted from the backend (0).
inline constexpr int kMaxStackDepth = 8;
std::string_view OpName(Op op);
// Write, discard and write-zeroes: the operations that change what the device holds.
inline constexpr bool IsWriteType(Op op) {
  return op == Op::kWrite || op == Op::kDiscard || op == Op::kWriteZeroes;
}

// Request flags.
enum IoFlag : uint32_t {
  kIoFua = 1u << 0,       // write/write-zeroes: durable before completion
  kIoMayUnmap = 1u << 1,  // write-zeroes: the device may deallocate the range
  // write-zeroes: fail with kNotSupported unless the device zeroes without writing data
  // (kCapFastZeroes), like NBD's FAST_ZERO.
  kIoFastZero = 1u << 2,
};
using IoFlags = uint32_t;

struct IoRequest;
// Called exactly once when the request completes; `req.status` holds the result. The callback
// runs on the thread that owns the queue, inside Submit() or Poll(). It may submit new
// requests to the same queue.
using IoCallback = void (*)(IoRequest& req);

struct IoRequest {
  Op op = Op::kRead;
  IoFlags flags = 0;
  uint64_t offset = 0;  // bytes; flush ignores offset and length
  uint64_t length = 0;  // bytes
  // Data buffers for read and write; their lengths must add up to `length`.
  const iovec* iov = nullptr;
  uint32_t iovcnt = 0;
  IoCallback on_complete = nullptr;
  void* user_data = nullptr;
  std::error_code status{};  // valid when on_complete runs

  // Owned by the queue while the request is in flight; do not touch.
  // Latency accounting (lib/stats.h; only when the device keeps latency): when the request
  // entered the queue, when it completed (carried up from the request below that completed
  // it, 0 if none), that lower request's latency, and the self time of every level of the
  // stack on the request's path (the levels below it, then its own).
  uint64_t submit_ns_ = 0;
  uint64_t done_ns_ = 0;
  uint64_t below_ns_ = 0;
  uint32_t path_ns_[kMaxStackDepth] = {};
  IoRequest* next_ = nullptr;
  void* internal_ = nullptr;
  // The CPU tag of the code that submitted the request (lib/cpu_account.h): its callback runs
  // under it.
  CpuAccount* cpu_tag_ = nullptr;
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_IO_REQUEST_H_
