#include "imagetools/compare.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "lib/aligned_buffer.h"
#include "lib/extent.h"
#include "lib/iovec.h"
#include "lib/sync_io.h"

namespace vstack {
namespace {

constexpr uint64_t kChunk = 1 << 20;

bool MapsZero(BlockDevice& d, uint64_t offset, uint64_t length) {
  std::vector<Extent> ext;
  if (!d.MapExtents(offset, length, &ext)) return false;
  return std::all_of(ext.begin(), ext.end(),
                     [](const Extent& e) { return (e.flags & kExtentZero) != 0; });
}

// The first offset in [offset, offset + length) where `a` and `b` differ, by 512-byte sector.
// `b` may be null: then `a` is compared with zeros.
std::optional<uint64_t> FirstDifference(const std::byte* a, const std::byte* b, uint64_t offset,
                                        uint64_t length) {
  for (uint64_t i = 0; i < length; i += 512) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(512, length - i));
    const bool same = b ? std::memcmp(a + i, b + i, n) == 0 : IsZero(a + i, n);
    if (!same) return offset + i;
  }
  return std::nullopt;
}

// The error of a chunk read of `io` that failed with `ec`, naming the lowest offset in it that
// fails (the chunk is read again in smaller pieces, into `buf`).
Error ReadError(SyncIo& io, uint64_t offset, std::span<std::byte> buf, std::error_code ec) {
  const FailedRead at = io.LowestFailedRead(offset, buf, ec);
  return MakeError(at.error,
                   "read error at offset " + std::to_string(at.offset) + ": " + at.error.message());
}

// Reads `buf` from `io` at `offset`; an error names the lowest offset that fails.
Status ReadChunk(SyncIo& io, uint64_t offset, std::span<std::byte> buf) {
  if (std::error_code ec = io.Read(offset, buf)) return ReadError(io, offset, buf, ec);
  return OkStatus();
}

// A device's bytes [offset, offset + length), read in whole logical blocks of the device: two
// disks of different sectors (a VHDX of 4 KiB sectors and a VHD of 512-byte ones) share a part
// that may end, and the larger one's extra part begin, inside a block of one of them.
class Reader {
 public:
  Reader(BlockDevice& d, size_t chunk)
      : d_(d),
        io_(d),
        block_(std::max<uint64_t>(d.geometry().logical_block, 1)),
        buf_(chunk + 2 * block_, std::max<size_t>(4096, d.geometry().mem_alignment)) {}

  Result<const std::byte*> Read(uint64_t offset, uint64_t length) {
    const uint64_t start = offset / block_ * block_;
    const uint64_t end =
        std::min((offset + length + block_ - 1) / block_ * block_, d_.geometry().size_bytes);
    VSTACK_RETURN_IF_ERROR(
        ReadChunk(io_, start, buf_.span().first(static_cast<size_t>(end - start))));
    return buf_.data() + (offset - start);
  }

  bool ReadsZero(uint64_t offset, uint64_t length) {
    const uint64_t start = offset / block_ * block_;
    const uint64_t end =
        std::min((offset + length + block_ - 1) / block_ * block_, d_.geometry().size_bytes);
    return MapsZero(d_, start, end - start);
  }

 private:
  BlockDevice& d_;
  SyncIo io_;
  const uint64_t block_;
  AlignedBuffer buf_;
};

}  // namespace

Result<Comparison> CompareImages(BlockDevice& a, BlockDevice& b, const CompareOptions& options) {
  Comparison c;
  c.size_a = a.geometry().size_bytes;
  c.size_b = b.geometry().size_bytes;
  if (c.size_mismatch() && options.strict) return c;
  Reader ra(a, kChunk), rb(b, kChunk);
  const uint64_t common = std::min(c.size_a, c.size_b), longest = std::max(c.size_a, c.size_b);
  // Chunks of the common part, then chunks of the larger one's extra part.
  for (uint64_t off = 0, len = 0; off < longest; off += len) {
    if (options.keep_going && !options.keep_going()) {
      return MakeError(Errc::kCancelled, "compare: interrupted at offset " + std::to_string(off));
    }
    const bool both = off < common;
    len = std::min(kChunk, (both ? common : longest) - off);
    if (both) {
      if (ra.ReadsZero(off, len) && rb.ReadsZero(off, len)) continue;
      VSTACK_ASSIGN_OR_RETURN(const std::byte* da, ra.Read(off, len));
      VSTACK_ASSIGN_OR_RETURN(const std::byte* db, rb.Read(off, len));
      c.first_difference = FirstDifference(da, db, off, len);
    } else {
      // Past the end of the shorter one: the longer one must read as zeros.
      Reader& longer = c.size_a > c.size_b ? ra : rb;
      if (longer.ReadsZero(off, len)) continue;
      VSTACK_ASSIGN_OR_RETURN(const std::byte* d, longer.Read(off, len));
      c.first_difference = FirstDifference(d, nullptr, off, len);
    }
    if (c.first_difference) return c;
  }
  c.identical = true;
  return c;
}

}  // namespace vstack
