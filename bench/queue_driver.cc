#include "bench/queue_driver.h"

#include <cstring>

namespace vstack::bench {

QueueDriver::QueueDriver(IoQueue& queue, const DriverConfig& config)
    : queue_(queue),
      config_(config),
      buffers_(static_cast<size_t>(config.depth) * config.block_size, 4096),
      slots_(config.depth),
      rng_(config.seed * 0x9E3779B97F4A7C15ull + 1) {
  const uint64_t span = config.span ? config.span : queue.device().geometry().size_bytes;
  blocks_ = span / config.block_size;
  std::memset(buffers_.data(), 0x5A, buffers_.size());
  if (config.register_buffers) {
    iovec all = buffers_.iov();
    queue_.RegisterBuffers(std::span<const iovec>(&all, 1));
  }
  for (uint32_t i = 0; i < config.depth; ++i) {
    Slot& s = slots_[i];
    s.iov = iovec{buffers_.data() + static_cast<size_t>(i) * config.block_size, config.block_size};
    s.driver = this;
    s.req.op = config.op;
    s.req.length = config.block_size;
    s.req.iov = &s.iov;
    s.req.iovcnt = 1;
    s.req.on_complete = &QueueDriver::OnComplete;
    s.req.user_data = &s;
  }
}

QueueDriver::~QueueDriver() { queue_.WaitIdle(); }

uint64_t QueueDriver::NextOffset() {
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  return ((rng_ * 0x2545F4914F6CDD1Dull) % blocks_) * config_.block_size;
}

void QueueDriver::Prepare(Slot& s) { s.req.offset = NextOffset(); }

void QueueDriver::OnComplete(IoRequest& req) {
  Slot& s = *static_cast<Slot*>(req.user_data);
  QueueDriver& d = *s.driver;
  if (req.status && !d.error_) d.error_ = req.status;
  if (d.to_issue_ > 0) {
    --d.to_issue_;
    d.Prepare(s);
    d.queue_.Submit(req);
  }
}

std::error_code QueueDriver::Run(uint64_t n) {
  const uint64_t first = std::min<uint64_t>(n, slots_.size());
  to_issue_ = n - first;
  std::vector<IoRequest*> batch;
  for (uint64_t i = 0; i < first; ++i) {
    Prepare(slots_[i]);
    batch.push_back(&slots_[i].req);
  }
  queue_.Submit(batch);
  queue_.WaitIdle();
  return error_;
}

}  // namespace vstack::bench
