// libFuzzer target: arbitrary metadata under the layers that keep it in a MetaStore-style
// superblock (dedup, zstd, crc32c). The input is compact so that seeds stay small:
//
//   u8 layer (0 dedup, 1 zstd, 2 crc32c; taken modulo 3), then records of
//   [u16 page number][4096 bytes]: that 4 KiB page of a 4 MiB memory device (the rest zero).
//
// Each input is opened read-only (loaded, mapped, read in samples, checked), then writable for
// check (checked with repair, written to, flushed, closed). Any crash, sanitizer report, leak,
// or allocation beyond the device's real content is a bug; errors are fine. Seeds:
// tests/fuzz/make_metastore_seeds.sh. Build and run: see tests/fuzz/CMakeLists.txt.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"

namespace {

using vstack::DevicePtr;

constexpr uint64_t kDeviceBytes = 4 << 20;
constexpr size_t kPage = 4096;

DevicePtr MemoryWith(const uint8_t* data, size_t size) {
  auto mem = vstack::Open("memory:" + std::to_string(kDeviceBytes));
  if (!mem) return nullptr;
  vstack::SyncIo io(**mem);
  vstack::AlignedBuffer page(kPage, 4096);
  for (size_t at = 0; at + 2 + kPage <= size; at += 2 + kPage) {
    const uint64_t n = data[at] | (uint64_t{data[at + 1]} << 8);
    if ((n + 1) * kPage > kDeviceBytes) continue;
    std::memcpy(page.data(), data + at + 2, kPage);
    if (io.Write(n * kPage, page.span())) return nullptr;
  }
  return std::move(*mem);
}

vstack::Result<DevicePtr> OpenLayer(const char* layer, DevicePtr lower, bool read_only) {
  const vstack::ComponentInfo* c = vstack::Registry::Global().Find(layer);
  vstack::OptionValues values(layer, "", {}, &c->options);
  vstack::OpenOptions open;
  open.read_only = read_only;
  open.for_check = !read_only;
  return c->open_layer(std::move(lower), values, open);
}

void Exercise(vstack::BlockDevice& dev, bool write) {
  const uint64_t size = dev.geometry().size_bytes;
  vstack::SyncIo io(dev);
  vstack::AlignedBuffer buf(64 << 10, 4096);
  auto read = [&](uint64_t off, uint64_t len) {
    len = std::min<uint64_t>({len, size - std::min(off, size), buf.size()});
    if (len >= 4096) (void)io.Read(off, buf.span().first(len / 4096 * 4096));
  };
  read(0, 64 << 10);
  if (size > (64 << 10)) read(size - (64 << 10), 64 << 10);
  std::vector<vstack::Extent> extents;
  if (dev.MapExtents(0, size, &extents)) {
    for (size_t i = 0; i < extents.size() && i < 64; ++i) read(extents[i].offset, 4096);
  }
  if (write && size >= 16384) {
    std::memset(buf.data(), 0x5A, 8192);
    (void)io.Write(0, buf.span().first(8192));
    (void)io.Write(size / 2 / 4096 * 4096, buf.span().first(4096));
    (void)io.WriteZeroes(4096, 4096);
    (void)io.Flush();
    read(0, 16384);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 64 * (2 + kPage)) return 0;
  static const char* const kLayers[] = {"dedup", "zstd", "crc32c"};
  const char* layer = kLayers[data[0] % 3];
  for (bool read_only : {true, false}) {
    DevicePtr mem = MemoryWith(data + 1, size - 1);
    if (!mem) return 0;
    auto dev = OpenLayer(layer, std::move(mem), read_only);
    if (!dev) continue;
    vstack::CheckResult r;
    (void)(*dev)->Check(read_only ? vstack::CheckMode::kReadOnly : vstack::CheckMode::kRepairAll,
                        &r);
    Exercise(**dev, !read_only);
    (void)(*dev)->Close();
  }
  return 0;
}
