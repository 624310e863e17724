// libFuzzer target: arbitrary metadata under the layers that keep it in a MetaStore-style
// superblock (dedup, zstd, crc32c). The input is compact so that seeds stay small:
//
//   u8 layer (0 dedup, 1 zstd, 2 crc32c; taken modulo 3), then records of
//   [u16 page number][4096 bytes]: that 4 KiB page of a 4 MiB memory device (the rest zero).
//
// Each input is opened read-only (loaded, mapped, read in samples, checked), then writable for
// check (checked with repair, written to, flushed, closed); under libFuzzer, one of the two per
// input (fuzz_mode.h). Any crash, sanitizer report, leak, or allocation beyond the device's real
// content is a bug; errors are fine. Seeds:
// tests/fuzz/make_metastore_seeds.sh. Build and run: see tests/fuzz/CMakeLists.txt.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/fuzz/fuzz_exercise.h"
#include "tests/fuzz/fuzz_mode.h"

namespace {

using vstack::DevicePtr;
using vstack::fuzz::Exercise;

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

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vstack::fuzz::SetOneModePerInput();  // fuzz_mode.h
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 64 * (2 + kPage)) return 0;
  static const char* const kLayers[] = {"dedup", "zstd", "crc32c"};
  const char* layer = kLayers[data[0] % 3];
  for (bool read_only : {true, false}) {
    if (!vstack::fuzz::RunsMode(data, size, read_only ? 0 : 1, 2)) continue;
    DevicePtr mem = MemoryWith(data + 1, size - 1);
    if (!mem) return 0;
    auto dev = OpenLayer(layer, std::move(mem), read_only);
    if (!dev) continue;
    vstack::CheckResult r;
    (void)(*dev)->Check(read_only ? vstack::CheckMode::kReadOnly : vstack::CheckMode::kRepairAll,
                        &r);
    Exercise(**dev, !read_only, /*max_extents=*/64);
    (void)(*dev)->Close();
  }
  return 0;
}
