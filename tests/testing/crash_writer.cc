// vstack_crash_writer SPEC SEED SPAN: runs CrashWorkload(SEED, SPAN) through the stack SPEC, one
// request at a time, forever (until killed). After each request completes it prints
// "done N" (N = index of the workload op), after each flush "flushed N", flushing stdout, so a
// test that kills it with SIGKILL knows what the stack acknowledged.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/testing/crash_workload.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s SPEC SEED SPAN\n", argv[0]);
    return 2;
  }
  auto dev = vstack::Open(argv[1]);
  if (!dev) {
    std::fprintf(stderr, "%s\n", dev.error().ToString().c_str());
    return 1;
  }
  vstack::testing::CrashWorkload workload(std::strtoull(argv[2], nullptr, 10),
                                          std::strtoull(argv[3], nullptr, 10));
  vstack::SyncIo io(**dev);
  vstack::AlignedBuffer buf(1 << 20);
  for (uint64_t i = 0;; ++i) {
    vstack::testing::WorkloadOp op = workload.Next();
    std::error_code ec;
    const char* what = "done";
    switch (op.kind) {
      case vstack::testing::WorkloadOp::kWrite:
        std::memcpy(buf.data(), op.data.data(), op.length);
        ec = io.Write(op.offset, buf.span().first(op.length));
        break;
      case vstack::testing::WorkloadOp::kZeroes:
        ec = io.WriteZeroes(op.offset, op.length);
        break;
      case vstack::testing::WorkloadOp::kFlush:
        ec = io.Flush();
        what = "flushed";
        break;
    }
    if (ec) {
      std::fprintf(stderr, "op %llu failed: %s\n", static_cast<unsigned long long>(i),
                   ec.message().c_str());
      return 1;
    }
    std::printf("%s %llu\n", what, static_cast<unsigned long long>(i));
    std::fflush(stdout);
  }
}
