#include "lib/sync_io.h"

#include <algorithm>

namespace vstack {
namespace {

void MarkDone(IoRequest& req) { *static_cast<bool*>(req.user_data) = true; }

std::error_code ReadOn(IoQueue& queue, uint64_t offset, std::span<std::byte> buf) {
  iovec v{buf.data(), buf.size()};
  IoRequest r;
  r.op = Op::kRead;
  r.offset = offset;
  r.length = buf.size();
  r.iov = &v;
  r.iovcnt = 1;
  return Execute(queue, r);
}

}  // namespace

std::error_code Execute(IoQueue& queue, IoRequest& req) {
  bool done = false;
  req.on_complete = &MarkDone;
  req.user_data = &done;
  queue.Submit(req);
  while (!done) queue.Poll(1);
  return req.status;
}

FailedRead LowestFailedRead(IoQueue& queue, const Geometry& geometry, uint64_t offset,
                            std::span<std::byte> buf, std::error_code error) {
  const size_t block = std::max<size_t>(geometry.logical_block, geometry.mem_alignment);
  FailedRead found{offset, error};
  while (buf.size() > block) {
    // The lower half, in whole blocks (at least one); the upper half is the rest.
    const size_t low = std::max(buf.size() / 2 / block * block, block);
    if (std::error_code ec = ReadOn(queue, found.offset, buf.first(low))) {
      found.error = ec;
      buf = buf.first(low);
    } else if (std::error_code ec = ReadOn(queue, found.offset + low, buf.subspan(low))) {
      found = {found.offset + low, ec};
      buf = buf.subspan(low);
    } else {
      break;  // the error does not repeat in smaller reads
    }
  }
  return found;
}

IoQueue* SyncIo::queue() {
  if (!queue_ && !open_error_.code) {
    auto q = device_.OpenQueue();
    if (q) {
      queue_ = std::move(*q);
    } else {
      open_error_ = q.error();
    }
  }
  return queue_.get();
}

std::error_code SyncIo::Run(IoRequest& req) {
  IoQueue* q = queue();
  if (q == nullptr) return open_error_.code;
  return Execute(*q, req);
}

FailedRead SyncIo::LowestFailedRead(uint64_t offset, std::span<std::byte> buf,
                                    std::error_code error) {
  IoQueue* q = queue();
  if (q == nullptr) return {offset, error};
  return vstack::LowestFailedRead(*q, device_.geometry(), offset, buf, error);
}

std::error_code SyncIo::Read(uint64_t offset, std::span<std::byte> buf) {
  iovec v{buf.data(), buf.size()};
  return ReadV(offset, std::span<const iovec>(&v, 1));
}

std::error_code SyncIo::ReadV(uint64_t offset, std::span<const iovec> iov) {
  IoRequest r;
  r.op = Op::kRead;
  r.offset = offset;
  r.iov = iov.data();
  r.iovcnt = static_cast<uint32_t>(iov.size());
  for (const iovec& v : iov) r.length += v.iov_len;
  return Run(r);
}

std::error_code SyncIo::Write(uint64_t offset, std::span<const std::byte> buf, IoFlags flags) {
  iovec v{const_cast<std::byte*>(buf.data()), buf.size()};
  return WriteV(offset, std::span<const iovec>(&v, 1), flags);
}

std::error_code SyncIo::WriteV(uint64_t offset, std::span<const iovec> iov, IoFlags flags) {
  IoRequest r;
  r.op = Op::kWrite;
  r.flags = flags;
  r.offset = offset;
  r.iov = iov.data();
  r.iovcnt = static_cast<uint32_t>(iov.size());
  for (const iovec& v : iov) r.length += v.iov_len;
  return Run(r);
}

std::error_code SyncIo::Flush() {
  IoRequest r;
  r.op = Op::kFlush;
  return Run(r);
}

std::error_code SyncIo::Discard(uint64_t offset, uint64_t length) {
  IoRequest r;
  r.op = Op::kDiscard;
  r.offset = offset;
  r.length = length;
  return Run(r);
}

std::error_code SyncIo::WriteZeroes(uint64_t offset, uint64_t length, IoFlags flags) {
  IoRequest r;
  r.op = Op::kWriteZeroes;
  r.flags = flags;
  r.offset = offset;
  r.length = length;
  return Run(r);
}

}  // namespace vstack
