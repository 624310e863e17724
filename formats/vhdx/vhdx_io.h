// Blocking metadata I/O on one queue of the device below a VHDX layer: used while opening,
// replaying the log, committing an allocation and closing (never for guest data). Buffers are
// copied into 4 KiB-aligned memory, so any lower memory alignment up to 4 KiB works.
#ifndef VSTACK_FORMATS_VHDX_VHDX_IO_H_
#define VSTACK_FORMATS_VHDX_VHDX_IO_H_

#include <cstdint>
#include <span>
#include <string>

#include "lib/block_device.h"

namespace vstack::vhdx {

// Reads `out.size()` bytes at `offset` (both multiples of the device's logical block).
Status ReadAt(IoQueue& q, uint64_t offset, std::span<uint8_t> out);
// Writes `data` at `offset`; `flags` may hold kIoFua.
Status WriteAt(IoQueue& q, uint64_t offset, std::span<const uint8_t> data, IoFlags flags = 0);
// Writes `length` zero bytes at `offset`.
Status ZeroAt(IoQueue& q, uint64_t offset, uint64_t length);
Status FlushQueue(IoQueue& q);
// True if `device` maps [offset, offset+length) as reading zeros (MapExtents: a hole in a
// file, say): bytes that need not be read, nor written with zeros. A device that cannot tell
// (no extents, or an error) holds data there, for all the caller knows: false.
bool MappedAsZeros(BlockDevice& device, uint64_t offset, uint64_t length);
// Submits every request at once and polls until all have completed; the first error wins.
// Callbacks and user data of the requests are overwritten.
Status RunAll(IoQueue& q, std::span<IoRequest* const> reqs);

}  // namespace vstack::vhdx

#endif  // VSTACK_FORMATS_VHDX_VHDX_IO_H_
