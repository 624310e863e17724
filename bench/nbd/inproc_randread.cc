// inproc_randread SPEC SECONDS [prefill]: 4K random reads at queue depth 32 on one queue, in
// process: the same job as bench/nbd/randread-4k-qd32.fio, without NBD in between. Prints
// "iops N". bench/nbd/run.sh divides the NBD figure by this one. (A stand-in for
// `vstack bench --bs 4k --write-pct 0 --qd 32 --threads 1` until that lands on main.)
//
// With "prefill", the whole device is written first (1 MiB writes), so that reads find data.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"

namespace {

constexpr int kDepth = 32;
constexpr uint64_t kBlock = 4096;

struct Reader {
  vstack::IoQueue* queue = nullptr;
  uint64_t blocks = 0;
  uint64_t rng = 88172645463325252ull;
  uint64_t submitted = 0;
  uint64_t completed = 0;
  uint64_t target = 0;  // stop resubmitting once this many requests were submitted
  uint64_t Next() {  // xorshift64
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  }
};

struct Slot {
  vstack::IoRequest req;
  iovec iov{};
  Reader* reader = nullptr;
};

void OnDone(vstack::IoRequest& r) {
  Slot* s = static_cast<Slot*>(r.user_data);
  Reader& rd = *s->reader;
  if (r.status) {
    std::fprintf(stderr, "read failed: %s\n", r.status.message().c_str());
    std::exit(1);
  }
  ++rd.completed;
  if (rd.submitted >= rd.target) return;
  ++rd.submitted;
  r.offset = rd.Next() % rd.blocks * kBlock;
  rd.queue->Submit(r);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SPEC SECONDS [prefill]\n", argv[0]);
    return 2;
  }
  auto dev = vstack::Open(argv[1]);
  if (!dev) {
    std::fprintf(stderr, "%s\n", dev.error().ToString().c_str());
    return 1;
  }
  const double seconds = std::atof(argv[2]);
  const uint64_t size = (*dev)->geometry().size_bytes;
  if (argc > 3 && std::string(argv[3]) == "prefill") {
    vstack::SyncIo io(**dev);
    vstack::AlignedBuffer chunk(1 << 20);
    for (size_t i = 0; i < chunk.size(); ++i) chunk.data()[i] = std::byte(i * 131 + 7);
    for (uint64_t off = 0; off < size; off += chunk.size()) {
      const uint64_t n = std::min<uint64_t>(chunk.size(), size - off);
      if (auto ec = io.Write(off, chunk.span().first(n))) {
        std::fprintf(stderr, "prefill: %s\n", ec.message().c_str());
        return 1;
      }
    }
  }
  auto queue = (*dev)->OpenQueue();
  if (!queue) {
    std::fprintf(stderr, "%s\n", queue.error().ToString().c_str());
    return 1;
  }
  Reader rd;
  rd.queue = queue->get();
  rd.blocks = size / kBlock;
  std::vector<vstack::AlignedBuffer> buffers;
  std::vector<Slot> slots(kDepth);
  for (Slot& s : slots) {
    buffers.emplace_back(kBlock);
    s.iov = buffers.back().iov();
    s.reader = &rd;
    s.req.op = vstack::Op::kRead;
    s.req.length = kBlock;
    s.req.iov = &s.iov;
    s.req.iovcnt = 1;
    s.req.on_complete = &OnDone;
    s.req.user_data = &s;
  }
  // Requests resubmit themselves from their callbacks until `target` submissions; the main
  // loop raises the target in rounds of 8192 and checks the clock between rounds. (Each
  // round's last 32 requests run at a falling queue depth: 0.4% of the requests.)
  std::vector<vstack::IoRequest*> batch;
  for (Slot& s : slots) batch.push_back(&s.req);
  const auto t0 = std::chrono::steady_clock::now();
  const auto end = t0 + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    rd.target = rd.submitted + 8192;
    for (Slot& s : slots) s.req.offset = rd.Next() % rd.blocks * kBlock;
    rd.submitted += kDepth;
    (*queue)->Submit(batch);
    (*queue)->WaitIdle();
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("iops %.0f\n", rd.completed / elapsed);
  queue->reset();
  return (*dev)->Close() ? 0 : 1;
}
