// libFuzzer target: arbitrary bytes as a VHDX image on a memory device, opened writable (which
// replays a log) and for check; read in samples (start, end, every extent), mapped, checked and
// written to; under libFuzzer, one of the two opens per input (fuzz_mode.h). Any crash, sanitizer
// report, leak or out-of-range access below is a bug; errors are fine. Build and run: see tests/fuzz/CMakeLists.txt.
//
// A VHDX keeps its structures megabytes apart (log at 1 MiB, metadata and BAT after it), so an
// input is not the image itself but a sparse description of it, which keeps seeds a few KiB and
// lets every mutation land in a structure (tests/fuzz/vhdx_sparse.py writes and expands it):
//   u32 LE  file size in 4 KiB pages (at most kMaxPages; smaller than the pages below: grown)
//   then records, until the input ends:
//   u32 LE  page number (modulo kMaxPages)   u16 LE  n (at most 4096)   n bytes at the page start
// A record cut short by the end of the input is applied as far as it goes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "formats/vhdx/vhdx_device.h"
#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/fuzz/fuzz_exercise.h"
#include "tests/fuzz/fuzz_mode.h"

namespace {

using vstack::DevicePtr;
using vstack::fuzz::Exercise;

constexpr uint32_t kPage = 4096;
constexpr uint32_t kMaxPages = 8192;  // 32 MiB: every structure of a small image fits

uint32_t Load32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | uint32_t{p[3]} << 24; }

// The memory device the sparse input describes (format above).
DevicePtr MemoryWith(const uint8_t* data, size_t size) {
  if (size < 4) return nullptr;
  struct Record {
    uint32_t page;
    const uint8_t* bytes;
    size_t n;
  };
  std::vector<Record> records;
  uint64_t pages = std::clamp<uint32_t>(Load32(data), 1, kMaxPages);
  for (size_t at = 4; at + 6 <= size;) {
    const uint32_t page = Load32(data + at) % kMaxPages;
    const size_t n =
        std::min<size_t>({size_t{data[at + 4]} | size_t{data[at + 5]} << 8, kPage, size - at - 6});
    records.push_back({page, data + at + 6, n});
    pages = std::max<uint64_t>(pages, page + 1);
    at += 6 + n;
  }
  auto mem = vstack::Open("memory:" + std::to_string(pages * kPage));
  if (!mem) return nullptr;
  vstack::SyncIo io(**mem);
  vstack::AlignedBuffer buf(kPage, kPage);
  for (const Record& r : records) {
    std::memset(buf.data(), 0, kPage);
    std::memcpy(buf.data(), r.bytes, r.n);
    if (io.Write(uint64_t{r.page} * kPage, buf.span())) return nullptr;
  }
  return std::move(*mem);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vstack::fuzz::SetOneModePerInput();  // fuzz_mode.h
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (int mode = 0; mode < 2; ++mode) {
    if (!vstack::fuzz::RunsMode(data, size, mode, 2)) continue;
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
