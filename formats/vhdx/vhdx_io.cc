#include "formats/vhdx/vhdx_io.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/extent.h"
#include "lib/sync_io.h"

namespace vstack::vhdx {
namespace {

constexpr size_t kChunk = 1 << 20;

Status Run(IoQueue& q, IoRequest& r, const char* what) {
  if (std::error_code ec = Execute(q, r)) {
    return MakeError(ec, std::string("vhdx: ") + what + " at offset " + std::to_string(r.offset) +
                             " failed: " + ec.message());
  }
  return OkStatus();
}

}  // namespace

Status ReadAt(IoQueue& q, uint64_t offset, std::span<uint8_t> out) {
  AlignedBuffer buf(std::min(out.size(), kChunk));
  for (size_t done = 0; done < out.size();) {
    const size_t n = std::min(out.size() - done, kChunk);
    iovec v{buf.data(), n};
    IoRequest r;
    r.op = Op::kRead;
    r.offset = offset + done;
    r.length = n;
    r.iov = &v;
    r.iovcnt = 1;
    VSTACK_RETURN_IF_ERROR(Run(q, r, "read"));
    std::memcpy(out.data() + done, buf.data(), n);
    done += n;
  }
  return OkStatus();
}

Status WriteAt(IoQueue& q, uint64_t offset, std::span<const uint8_t> data, IoFlags flags) {
  AlignedBuffer buf(std::min(data.size(), kChunk));
  for (size_t done = 0; done < data.size();) {
    const size_t n = std::min(data.size() - done, kChunk);
    std::memcpy(buf.data(), data.data() + done, n);
    iovec v{buf.data(), n};
    IoRequest r;
    r.op = Op::kWrite;
    r.flags = flags;
    r.offset = offset + done;
    r.length = n;
    r.iov = &v;
    r.iovcnt = 1;
    VSTACK_RETURN_IF_ERROR(Run(q, r, "write"));
    done += n;
  }
  return OkStatus();
}

Status ZeroAt(IoQueue& q, uint64_t offset, uint64_t length) {
  if (length == 0) return OkStatus();
  IoRequest r;
  r.op = Op::kWriteZeroes;
  r.offset = offset;
  r.length = length;
  return Run(q, r, "write-zeroes");
}

Status FlushQueue(IoQueue& q) {
  IoRequest r;
  r.op = Op::kFlush;
  return Run(q, r, "flush");
}

Status RunAll(IoQueue& q, std::span<IoRequest* const> reqs) {
  size_t done = 0;
  for (IoRequest* r : reqs) {
    r->on_complete = [](IoRequest& req) { ++*static_cast<size_t*>(req.user_data); };
    r->user_data = &done;
  }
  q.Submit(reqs);
  while (done < reqs.size()) q.Poll(1);
  for (IoRequest* r : reqs) {
    if (r->status) {
      return MakeError(r->status, "vhdx: " + std::string(OpName(r->op)) + " at offset " +
                                      std::to_string(r->offset) +
                                      " failed: " + r->status.message());
    }
  }
  return OkStatus();
}

bool MappedAsZeros(BlockDevice& device, uint64_t offset, uint64_t length) {
  if (!device.Has(kCapExtents)) return false;
  std::vector<Extent> extents;
  if (!device.MapExtents(offset, length, &extents)) return false;
  uint64_t mapped = offset;
  for (const Extent& e : extents) {
    if (e.offset != mapped || !(e.flags & kExtentZero)) return false;
    mapped += e.length;
  }
  return mapped == offset + length;
}

}  // namespace vstack::vhdx
