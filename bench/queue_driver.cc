#include "bench/queue_driver.h"

#include <cstring>

namespace vstack::bench {

QueueDriver::QueueDriver(IoQueue& queue, const DriverConfig& config)
    : config_(config),
      fill_writes_(config.op == Op::kWrite && config.fill != nullptr),
      rng_(config.seed * 0x9E3779B97F4A7C15ull + 1),
      driver_(queue, *this, config.depth,
              SlotBuffers{.block_size = config.block_size, .register_buffers = config.register_buffers}) {
  const uint64_t span = config.span ? config.span : queue.device().geometry().size_bytes;
  blocks_ = span / config.block_size;
  std::memset(driver_.buffers().data(), 0x5A, driver_.buffers().size());
  for (DriverSlot& s : driver_.slots()) {  // all but the offset is the same for every request
    s.req.op = config.op;
    s.req.length = config.block_size;
    s.req.iov = &s.write_iov;
    s.req.iovcnt = 1;
  }
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
