// What the vhd layer costs per request on allocated blocks, against the raw device under it:
// memory (the software path alone) and a tmpfs file, 4 KiB requests at random offsets over
// 256 MiB, queue depth 1 and 32, reads and overwrites. VHD images: fixed, and dynamic with
// every block allocated (2 MiB blocks, bitmaps full: the lock-free path), and dynamic with
// every block half written (the partial-bitmap path, reads only); and a dynamic VHDX with every
// block allocated (1 MiB blocks: a BAT lookup and one request below per request).
//
//   build/bench/vhd_bench --benchmark_min_time=0.3 --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/queue_driver.h"
#include "bench/run_batches.h"
#include "formats/vhd/vhd_create.h"
#include "formats/vhd/vhd_device.h"
#include "formats/vhdx/vhdx_create.h"
#include "formats/vhdx/vhdx_device.h"
#include "lib/registry.h"
#include "lib/sync_io.h"

namespace vstack::bench {
namespace {

constexpr uint64_t kSpan = 256ull << 20;
constexpr uint64_t kBatch = 8192;

vhd::CreateParams Params(bool dynamic) {
  vhd::CreateParams p;
  p.requested_size = kSpan;
  p.force_size = true;
  p.dynamic = dynamic;
  p.preallocate = dynamic ? vhd::Preallocate::kMetadata : vhd::Preallocate::kOff;
  return p;
}

vhdx::CreateParams VhdxParams() {
  vhdx::CreateParams p;
  p.size = kSpan;
  p.block_size = 1 << 20;
  return p;
}

std::string ShmPath(const std::string& name) {
  return "/dev/shm/vstack-vhd-bench-" + std::to_string(::getpid()) + "-" + name;
}

// Opens `what` ("raw", "fixed", "dynamic", "partial", "vhdx") on `backend` ("memory" or "file"
// on tmpfs), with every byte of the disk written once, so that reads hit data.
Result<DevicePtr> OpenTarget(const std::string& backend, const std::string& what) {
  const bool raw = what == "raw";
  const bool vhdx = what == "vhdx";
  const vhd::CreateParams p = Params(what != "fixed");
  // A VHDX's blocks go past its metadata: room for every one of them.
  const uint64_t size = raw    ? kSpan
                        : vhdx ? vhdx::NewImageFileSize(VhdxParams()) + kSpan
                               : vhd::NewImageFileSize(p);
  DevicePtr lower;
  if (backend == "memory") {
    VSTACK_ASSIGN_OR_RETURN(lower, Open("memory:" + std::to_string(size)));
  } else {
    const std::string path = ShmPath(what);
    ::unlink(path.c_str());
    VSTACK_ASSIGN_OR_RETURN(lower,
                            Open("file:" + path + ",create=on,size=" + std::to_string(size)));
    ::unlink(path.c_str());  // the open descriptor keeps it alive
  }
  DevicePtr dev = std::move(lower);
  if (vhdx) {
    VSTACK_RETURN_IF_ERROR(vhdx::WriteNewImage(*dev, VhdxParams()));
    VSTACK_ASSIGN_OR_RETURN(dev, vhdx::VhdxDevice::Open(std::move(dev)));
  } else if (!raw) {
    VSTACK_RETURN_IF_ERROR(vhd::WriteNewImage(*dev, p));
    VSTACK_ASSIGN_OR_RETURN(dev, vhd::VhdDevice::Open(std::move(dev)));
  }
  SyncIo io(*dev);
  AlignedBuffer buf(1 << 20);
  std::memset(buf.data(), 0x5A, buf.size());
  for (uint64_t off = 0; off < kSpan; off += 1 << 20) {
    // "partial": only the first half of every block is written.
    if (what == "partial" && off % (2 << 20) != 0) continue;
    if (std::error_code ec = io.Write(off, buf.span())) return MakeError(ec, "populating");
  }
  return dev;
}

void VhdIo(benchmark::State& state, const std::string& backend, const std::string& what, Op op) {
  auto dev = OpenTarget(backend, what);
  if (!dev) {
    state.SkipWithError(dev.error().ToString().c_str());
    return;
  }
  auto q = (*dev)->OpenQueue();
  if (!q) {
    state.SkipWithError(q.error().ToString().c_str());
    return;
  }
  {
    QueueDriver driver(**q, DriverConfig{.op = op,
                                         .depth = static_cast<uint32_t>(state.range(0)),
                                         .block_size = 4096,
                                         .span = kSpan});
    RunBatches(state, driver, kBatch, 4096);
  }
  q->reset();
}

#define VHD_BENCH(name, backend, what, op)                        \
  void name(benchmark::State& s) { VhdIo(s, backend, what, op); } \
  BENCHMARK(name)->Arg(1)->Arg(32)->UseRealTime()->Unit(benchmark::kNanosecond)

VHD_BENCH(BM_Memory_Raw_Read, "memory", "raw", Op::kRead);
VHD_BENCH(BM_Memory_VhdFixed_Read, "memory", "fixed", Op::kRead);
VHD_BENCH(BM_Memory_VhdDynamic_Read, "memory", "dynamic", Op::kRead);
VHD_BENCH(BM_Memory_VhdPartial_Read, "memory", "partial", Op::kRead);
VHD_BENCH(BM_Memory_Raw_Write, "memory", "raw", Op::kWrite);
VHD_BENCH(BM_Memory_VhdFixed_Write, "memory", "fixed", Op::kWrite);
VHD_BENCH(BM_Memory_VhdDynamic_Write, "memory", "dynamic", Op::kWrite);
VHD_BENCH(BM_Memory_VhdxDynamic_Read, "memory", "vhdx", Op::kRead);
VHD_BENCH(BM_Memory_VhdxDynamic_Write, "memory", "vhdx", Op::kWrite);
VHD_BENCH(BM_Tmpfs_Raw_Read, "file", "raw", Op::kRead);
VHD_BENCH(BM_Tmpfs_VhdDynamic_Read, "file", "dynamic", Op::kRead);
VHD_BENCH(BM_Tmpfs_Raw_Write, "file", "raw", Op::kWrite);
VHD_BENCH(BM_Tmpfs_VhdDynamic_Write, "file", "dynamic", Op::kWrite);

}  // namespace
}  // namespace vstack::bench
