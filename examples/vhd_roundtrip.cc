// Example 1: create a dynamic VHD, write a pattern through the stack "vhd+file:PATH", flush,
// close, reopen and verify every byte.
//
//   vhd_roundtrip [PATH]     (default: ./vstack-example.vhd; the file is left behind)
#include <cstdio>
#include <string>
#include <vector>

#include <vstack/registry.h>
#include <vstack/sync_io.h>
#include <vstack/version.h>

namespace {

constexpr uint64_t kImageSize = 64ull << 20;
constexpr uint64_t kChunk = 64 << 10;

std::byte PatternAt(uint64_t offset) { return std::byte((offset * 131 + offset / 4096) & 0xff); }

int Fail(const std::string& what, const std::string& why) {
  std::fprintf(stderr, "vhd_roundtrip: %s: %s\n", what.c_str(), why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "vstack-example.vhd";
  const std::string spec = "vhd+file:" + path;
  std::remove(path.c_str());
  std::printf("libvstack %s\n", vstack::Version());

  if (vstack::Status s = vstack::CreateImage("vhd", path, kImageSize); !s) {
    return Fail("create " + path, s.error().ToString());
  }
  std::vector<std::byte> buf(kChunk);
  {
    auto device = vstack::Open(spec);
    if (!device) return Fail("open " + spec, device.error().ToString());
    {
      vstack::SyncIo io(**device);  // one queue; destroyed before the device closes
      // Every other 64 KiB chunk of the first 8 MiB: allocated and unallocated blocks alternate.
      for (uint64_t off = 0; off < (8u << 20); off += 2 * kChunk) {
        for (uint64_t i = 0; i < kChunk; ++i) buf[i] = PatternAt(off + i);
        if (auto ec = io.Write(off, buf)) return Fail("write", ec.message());
      }
      if (auto ec = io.Flush()) return Fail("flush", ec.message());
    }
    std::printf("wrote 4 MiB in 64 chunks to %s and flushed\n", spec.c_str());
    if (vstack::Status s = (*device)->Close(); !s) return Fail("close", s.error().ToString());
  }

  auto device = vstack::Open(spec, {.read_only = true});
  if (!device) return Fail("reopen " + spec, device.error().ToString());
  vstack::SyncIo io(**device);
  uint64_t checked = 0;
  for (uint64_t off = 0; off < (8u << 20); off += kChunk) {
    if (auto ec = io.Read(off, buf)) return Fail("read", ec.message());
    const bool written = (off / kChunk) % 2 == 0;
    for (uint64_t i = 0; i < kChunk; ++i) {
      const std::byte want = written ? PatternAt(off + i) : std::byte{0};
      if (buf[i] != want) return Fail("verify", "byte " + std::to_string(off + i) + " differs");
    }
    checked += kChunk;
  }
  std::printf("reopened %s (%s): %llu bytes verified\n", spec.c_str(),
              (*device)->Describe().c_str(), static_cast<unsigned long long>(checked));
  return 0;
}
