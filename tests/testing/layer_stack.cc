#include "tests/testing/layer_stack.h"

#include <gtest/gtest.h>

#include <cstring>

#include "blockdev/memory/memory_device.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/sync_io.h"

namespace vstack::testing {

Result<DevicePtr> OpenLayersOn(std::string_view layers, DevicePtr lower, const OpenOptions& options) {
  return OpenLayers(layers, std::move(lower), options);
}

DevicePtr MemoryWithImage(const std::vector<unsigned char>& image, uint32_t block) {
  DevicePtr dev = MakeDevice<MemoryDevice>(image.size(), block);
  SyncIo io(*dev);
  constexpr size_t kChunk = 1 << 20;
  AlignedBuffer buf(kChunk);
  for (size_t off = 0; off < image.size(); off += kChunk) {
    const size_t n = std::min(kChunk, image.size() - off);
    if (IsZero(&image[off], n)) continue;  // keep it sparse
    std::memcpy(buf.data(), &image[off], n);
    EXPECT_FALSE(io.Write(off, buf.span().first(n)));
  }
  return dev;
}

std::vector<unsigned char> ReadAll(BlockDevice& device) {
  std::vector<unsigned char> out(device.geometry().size_bytes);
  SyncIo io(device);
  constexpr size_t kChunk = 1 << 20;
  AlignedBuffer buf(kChunk, std::max<size_t>(4096, device.geometry().mem_alignment));
  for (size_t off = 0; off < out.size(); off += kChunk) {
    const size_t n = std::min(kChunk, out.size() - off);
    std::error_code ec = io.Read(off, buf.span().first(n));
    EXPECT_FALSE(ec) << "read at " << off << ": " << ec.message();
    std::memcpy(&out[off], buf.data(), n);
  }
  return out;
}

CheckResult CheckStack(BlockDevice& top) {
  CheckResult result;
  for (BlockDevice* d = &top; d != nullptr; d = d->lower()) {
    Status s = d->Check(CheckMode::kReadOnly, &result);
    EXPECT_TRUE(s.has_value()) << d->kind() << ": " << (s ? "" : s.error().ToString());
  }
  return result;
}

}  // namespace vstack::testing
