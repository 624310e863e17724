// The anchors `vstack bench` can run in the same rounds: qemu-img bench (--compare-qemu) and
// fio (--compare-fio), with the knobs mapped as closely as each tool allows; what could not be
// matched is said in the result's note. Part of the benchmark engine (it runs the tools and
// reads their output); bench/report only renders the results.
#ifndef VSTACK_BENCH_ANCHORS_ANCHORS_H_
#define VSTACK_BENCH_ANCHORS_ANCHORS_H_

#include <atomic>
#include <memory>
#include <string>

#include "bench/workload/anchor.h"

namespace vstack::bench {

// Both use the stack's bottom backend to choose the engine (uring: io_uring, file: qemu's thread
// pool / fio's psync) and its direct= option for the cache mode (O_DIRECT or page cache).
//
// qemu-img bench on the stack's image file, for plans qemu can open (raw files, fixed and
// dynamic VHD as "vpc"). qemu-img bench is sequential, single-threaded and read-or-write only:
// random workloads use a scattering stride (a golden-ratio step coprime with the number of
// blocks, so every block is visited once per pass in a spread-out order), threads x QD becomes
// its depth, a read/write mix becomes a read pass and a write pass with the same split, and the
// request count matches the I/Os vstack measured in the same round.
std::unique_ptr<Anchor> MakeQemuAnchor();

// fio on the file of a one-backend stack (raw), with the same block size, mix, pattern, queue
// depth, threads, duration, warm-up, seed, distribution, flush interval and buffer content.
std::unique_ptr<Anchor> MakeFioAnchor();

// Creates the image of `plan` at `path` with `qemu-img create` (format plan.qemu_format, the
// plan's image options, e.g. subformat=dynamic), as a qemu user would: `vstack bench
// --compare-qemu --qemu-create` starts vstack and qemu-img bench from qemu's own image. qemu
// rounds a VHD's size up to whole CHS geometry (1 GiB becomes 1,073,995,776 bytes).
Status CreateWithQemuImg(const StackPlan& plan, const std::string& path, uint64_t size,
                         const std::atomic<bool>* stop);

// The stride qemu-img bench uses to scatter a random workload over `blocks` blocks of `bs`
// bytes: a multiple of bs, coprime (in blocks) with `blocks`, below 2 GiB (qemu's limit).
uint64_t ScatterStride(uint64_t blocks, uint32_t bs);

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_ANCHORS_ANCHORS_H_
