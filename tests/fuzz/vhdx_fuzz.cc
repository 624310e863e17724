// libFuzzer target: arbitrary bytes as a VHDX image on a memory device, opened writable (which
// replays a log) and for check; read in samples (start, end, every extent), mapped,
// checked and written to. Any crash, sanitizer report, leak or out-of-range access below is a
// bug; errors are fine. Build and run: see tests/fuzz/CMakeLists.txt.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "formats/vhdx/vhdx_device.h"
#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"

namespace {

using vstack::DevicePtr;

DevicePtr MemoryWith(const uint8_t* data, size_t size) {
  const uint64_t dev_size = std::max<uint64_t>(4096, (size + 4095) / 4096 * 4096);
  auto mem = vstack::Open("memory:" + std::to_string(dev_size));
  if (!mem) return nullptr;
  vstack::SyncIo io(**mem);
  vstack::AlignedBuffer buf(dev_size, 4096);
  std::memcpy(buf.data(), data, size);
  if (io.Write(0, buf.span())) return nullptr;
  return std::move(*mem);
}

void Exercise(vstack::BlockDevice& dev, bool write) {
  const uint64_t size = dev.geometry().size_bytes;
  const uint64_t sector = dev.geometry().logical_block;
  vstack::SyncIo io(dev);
  vstack::AlignedBuffer buf(64 << 10, 4096);
  auto read = [&](uint64_t off, uint64_t len) {
    off = off / sector * sector;
    len = std::min<uint64_t>({len, size - std::min(off, size), buf.size()});
    if (len >= sector) (void)io.Read(off, buf.span().first(len / sector * sector));
  };
  read(0, 64 << 10);
  if (size > (64 << 10)) read(size - (64 << 10), 64 << 10);
  std::vector<vstack::Extent> extents;
  if (dev.MapExtents(0, size, &extents)) {
    for (size_t i = 0; i < extents.size() && i < 256; ++i) read(extents[i].offset, 4096);
  }
  if (write && size >= 8192) {
    std::memset(buf.data(), 0x5A, 8192);
    (void)io.Write(0, buf.span().first(8192));
    if (size > 16384) (void)io.Write(size / 2 / 4096 * 4096, buf.span().first(4096));
    (void)io.Flush();
    read(0, 16384);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (12 << 20)) return 0;  // qemu-img makes VHDX files of at least 8 MiB
  for (int mode = 0; mode < 2; ++mode) {
    DevicePtr mem = MemoryWith(data, size);
    if (!mem) return 0;
    vstack::vhdx::VhdxOptions options;
    options.for_check = mode == 1;
    auto dev = vstack::vhdx::VhdxDevice::Open(std::move(mem), options);
    if (!dev) continue;
    Exercise(**dev, /*write=*/true);
    vstack::PropertyList props;
    (*dev)->Properties(props);
    vstack::CheckResult check;
    (void)(*dev)->Check(vstack::CheckMode::kReadOnly, &check);
    (void)(*dev)->Close();
  }
  return 0;
}
