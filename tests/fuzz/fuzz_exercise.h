// What every fuzz target does with a device it managed to open from fuzzed bytes: the requests a
// user would send next, each a multiple of the device's logical block and bounded in size, so
// that an execution costs the same whatever size the fuzzed header claims.
#ifndef VSTACK_TESTS_FUZZ_FUZZ_EXERCISE_H_
#define VSTACK_TESTS_FUZZ_FUZZ_EXERCISE_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/block_device.h"
#include "lib/sync_io.h"

namespace vstack::fuzz {

// Reads 64 KiB at the start and at the end, maps the whole device and reads 4 KiB in each of the
// first `max_extents` extents; with `write`, also writes 8 KiB at the start and 4 KiB in the
// middle, writes zeroes over the second block, flushes and reads the start back. Errors are
// ignored: a target looks only for crashes, sanitizer reports and leaks.
inline void Exercise(BlockDevice& dev, bool write, size_t max_extents = 256) {
  const uint64_t size = dev.geometry().size_bytes;
  const uint64_t block = std::max<uint64_t>(512, dev.geometry().logical_block);
  SyncIo io(dev);
  AlignedBuffer buf(64 << 10, 4096);
  auto read = [&](uint64_t off, uint64_t len) {
    off = off / block * block;
    len = std::min<uint64_t>({len, size - std::min(off, size), buf.size()});
    if (len >= block) (void)io.Read(off, buf.span().first(len / block * block));
  };
  read(0, 64 << 10);
  if (size > (64 << 10)) read(size - (64 << 10), 64 << 10);
  std::vector<Extent> extents;
  if (dev.MapExtents(0, size, &extents)) {
    for (size_t i = 0; i < extents.size() && i < max_extents; ++i) read(extents[i].offset, 4096);
  }
  if (!write || size < block) return;
  std::memset(buf.data(), 0x5A, 8192);
  (void)io.Write(0, buf.span().first(std::min<uint64_t>(8192, size / block * block)));
  if (size > 16384) (void)io.Write(size / 2 / 4096 * 4096, buf.span().first(4096));
  if (size >= 2 * block) (void)io.WriteZeroes(block, block);
  (void)io.Flush();
  read(0, 16384);
}

}  // namespace vstack::fuzz

#endif  // VSTACK_TESTS_FUZZ_FUZZ_EXERCISE_H_
