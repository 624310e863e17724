// vstack compare [-s] [-f FMT] [-F FMT] A B: 0 if the two virtual disks hold the same content, 1
// if they differ, 2 on an error of any kind, usage errors included (qemu-img compare). A and B
// are files (their formats probed, or named by -f and -F) or stack specs. When the sizes
// differ, the extra part of the larger one must read as zeros, and a warning says so; with -s
// (strict) different sizes alone make the images differ. Ranges both report as zero
// (MapExtents) are not read.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tools/command.h"
#include "tools/image_args.h"

namespace vstack::cli {
namespace {

constexpr uint64_t kChunk = 1 << 20;

bool ReadsZero(BlockDevice& d, uint64_t offset, uint64_t length) {
  std::vector<Extent> ext;
  if (!d.MapExtents(offset, length, &ext)) return false;
  return std::all_of(ext.begin(), ext.end(),
                     [](const Extent& e) { return (e.flags & kExtentZero) != 0; });
}

// The first offset in [offset, offset + length) where `a` and `b` differ, or UINT64_MAX.
// `b` may be null: then `a` is compared with zeros.
uint64_t FirstDifference(const std::byte* a, const std::byte* b, uint64_t offset, uint64_t length) {
  for (uint64_t i = 0; i < length; i += 512) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(512, length - i));
    const bool same = b ? std::memcmp(a + i, b + i, n) == 0 : IsZero(a + i, n);
    if (!same) return offset + i;
  }
  return UINT64_MAX;
}

}  // namespace

struct CompareArgs {
  std::string a, b, a_format, b_format;
  bool strict = false;
};

void AddCompareCommand(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Compare two images' content (exit 0 identical, 1 different, 2 error)");
  cmd->add_flag("-s,--strict", args->strict, "images of different sizes differ (exit 1)");
  cmd->add_option("-f", args->a_format, "format of A: raw, vhd or vpc (default: probed)");
  cmd->add_option("-F", args->b_format, "format of B: raw, vhd or vpc (default: probed)");
  cmd->add_option("a", args->a, "first image file or stack spec")->required();
  cmd->add_option("b", args->b, "second image file or stack spec")->required();
  cmd->callback([args] {
    auto a_spec = ImageSpec(args->a, args->a_format);
    if (!a_spec) FailUsage("compare", a_spec.error().message);
    auto b_spec = ImageSpec(args->b, args->b_format);
    if (!b_spec) FailUsage("compare", b_spec.error().message);
    OpenOptions ro;
    ro.read_only = true;
    auto a = OpenImage(*a_spec, ro);
    if (!a) Fail("compare", a.error().ToString(), 2);
    auto b = OpenImage(*b_spec, ro);
    if (!b) Fail("compare", b.error().ToString(), 2);
    const uint64_t size_a = (*a)->geometry().size_bytes, size_b = (*b)->geometry().size_bytes;
    if (size_a != size_b && args->strict) {
      fmt::print("Strict mode: Image size mismatch! ({} vs {} bytes)\n", size_a, size_b);
      Exit(1);
    }
    if (size_a != size_b) {
      fmt::print("Warning: Image size mismatch! ({} vs {} bytes)\n", size_a, size_b);
    }
    SyncIo io_a(**a), io_b(**b);
    AlignedBuffer buf_a(kChunk, 4096), buf_b(kChunk, 4096);
    const uint64_t common = std::min(size_a, size_b), longest = std::max(size_a, size_b);
    // Chunks of the common part, then chunks of the larger one's extra part.
    for (uint64_t off = 0, len = 0; off < longest; off += len) {
      const bool both = off < common;
      len = std::min(kChunk, (both ? common : longest) - off);
      if (both && ReadsZero(**a, off, len) && ReadsZero(**b, off, len)) continue;
      uint64_t diff;
      if (both) {
        std::error_code ea = io_a.Read(off, buf_a.span().first(len));
        std::error_code eb = ea ? ea : io_b.Read(off, buf_b.span().first(len));
        if (ea || eb)
          Fail("compare", fmt::format("read error at offset {}: {}", off, (ea ? ea : eb).message()),
               2);
        diff = FirstDifference(buf_a.data(), buf_b.data(), off, len);
      } else {
        // Past the end of the shorter one: the longer one must read as zeros.
        BlockDevice& longer = size_a > size_b ? **a : **b;
        SyncIo& io = size_a > size_b ? io_a : io_b;
        const uint64_t start = std::max(off, common);
        const uint64_t n = off + len - start;
        if (ReadsZero(longer, start, n)) continue;
        if (std::error_code e = io.Read(start, buf_a.span().first(n))) {
          Fail("compare", fmt::format("read error at offset {}: {}", start, e.message()), 2);
        }
        diff = FirstDifference(buf_a.data(), nullptr, start, n);
      }
      if (diff != UINT64_MAX) {
        fmt::print("Content mismatch at offset {}!\n", diff);
        Exit(1);
      }
    }
    fmt::print("Images are identical.\n");
  });
}

}  // namespace vstack::cli
