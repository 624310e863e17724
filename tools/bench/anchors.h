// The anchors `vstack bench` can run in the same rounds: qemu-img bench (--compare-qemu) and
// fio (--compare-fio), with the knobs mapped as closely as each tool allows; what could not be
// matched is said in the result's note.
#ifndef VSTACK_TOOLS_BENCH_ANCHORS_H_
#define VSTACK_TOOLS_BENCH_ANCHORS_H_

#include <memory>

#include "bench/workload/anchor.h"

namespace vstack::cli {

// Both use the stack's bottom backend to choose the engine (uring: io_uring, file: qemu's thread
// pool / fio's psync) and its direct= option for the cache mode (O_DIRECT or page cache).
//
// qemu-img bench on the stack's image file, for plans qemu can open (raw files, fixed and
// dynamic VHD as "vpc"). qemu-img bench is sequential, single-threaded and read-or-write only:
// random workloads use a scattering stride (a golden-ratio step coprime with the number of
// blocks, so every block is visited once per pass in a spread-out order), threads x QD becomes
// its depth, a read/write mix becomes a read pass and a write pass with the same split, and the
// request count matches the I/Os vstack measured in the same round.
std::unique_ptr<bench::Anchor> MakeQemuAnchor();

// fio on the file of a one-backend stack (raw), with the same block size, mix, pattern, queue
// depth, threads, duration, warm-up, seed, distribution, flush interval and buffer content.
std::unique_ptr<bench::Anchor> MakeFioAnchor();

// The stride qemu-img bench uses to scatter a random workload over `blocks` blocks of `bs`
// bytes: a multiple of bs, coprime (in blocks) with `blocks`.
uint64_t ScatterStride(uint64_t blocks, uint32_t bs);

}  // namespace vstack::cli

#endif  // VSTACK_TOOLS_BENCH_ANCHORS_H_
