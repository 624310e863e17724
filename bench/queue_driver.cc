#include "bench/queue_driver.h"

#include <cstring>

namespace vstack::bench {

QueueDriver::QueueDriver(IoQueue& queue, const DriverConfig& config)
    : config_(config),
      rng_(config.seed * 0x9E3779B97F4A7C15ull + 1),
      driver_(queue, *this, config.depth,
              SlotBuffers{.block_size = config.block_size, .register_buffers = config.register_buffers}) {
  const uint64_t span = config.span ? config.span : queue.device().geometry().size_bytes;
  blocks_ = span / config.block_size;
  std::memset(driver_.buffers().data(), 0x5A, driver_.buffers().size());
}

uint64_t QueueDriver::NextOffset() {
  if (config_.sequential) {
    const uint64_t b = next_block_;
    next_block_ = next_block_ + 1 == blocks_ ? 0 : next_block_ + 1;
    return config_.base + b * config_.block_size;
  }
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  return config_.base + ((rng_ * 0x2545F4914F6CDD1Dull) % blocks_) * config_.block_size;
}

bool QueueDriver::Next(DriverSlot& s) {
  if (left_ == 0) return false;
  --left_;
  IoRequest& r = s.req;
  r.op = config_.op;
  r.offset = NextOffset();
  r.length = config_.block_size;
  r.iov = &s.write_iov;
  r.iovcnt = 1;
  if (config_.op == Op::kWrite && config_.fill) {
    config_.fill(std::span<std::byte>(static_cast<std::byte*>(s.write_iov.iov_base),
                                      s.write_iov.iov_len),
                 writes_);
  }
  if (config_.op == Op::kWrite) ++writes_;
  return true;
}

void QueueDriver::Done(DriverSlot& s) {
  if (s.req.status && !error_) error_ = s.req.status;
}

std::error_code QueueDriver::Run(uint64_t n) {
  left_ = n;
  driver_.Run();
  return error_;
}

}  // namespace vstack::bench
