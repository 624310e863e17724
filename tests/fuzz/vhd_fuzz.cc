// libFuzzer target: arbitrary bytes as a VHD image on a memory device, opened strictly and for
// check, read in samples (start, end, every allocated block), mapped, checked read-only and
// with repair, and written to. Any crash, sanitizer report, leak or out-of-range access below
// is a bug; errors are fine. Differencing disks (no parent on a memory device) are also opened
// alone (parent=none), and their locators decoded into parent candidates. The image is also
// opened over a growable file (a memfd, through the file backend), so that allocations that
// grow the file, the reservation trim at close and the tail repair of check are fuzzed too.
// Under libFuzzer each input runs one of these four ways (fuzz_mode.h); the seed replay runs all.
// Build and run: see tests/fuzz/CMakeLists.txt.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "formats/vhd/vhd_device.h"
#include "formats/vhd/vhd_parent.h"
#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/fuzz/fuzz_exercise.h"
#include "tests/fuzz/fuzz_mode.h"

namespace {

using vstack::DevicePtr;
using vstack::fuzz::Exercise;

DevicePtr MemoryWith(const uint8_t* data, size_t size) {
  const uint64_t dev_size = std::max<uint64_t>(512, (size + 511) / 512 * 512);
  auto mem = vstack::Open("memory:" + std::to_string(dev_size));
  if (!mem) return nullptr;
  vstack::SyncIo io(**mem);
  vstack::AlignedBuffer buf(dev_size, 4096);
  std::memcpy(buf.data(), data, size);
  if (io.Write(0, buf.span())) return nullptr;
  return std::move(*mem);
}

// The image in a memfd, opened with the file backend: a resizable device like a real file.
DevicePtr GrowableWith(const uint8_t* data, size_t size, int* fd) {
  *fd = ::memfd_create("vhd_fuzz", MFD_CLOEXEC);
  if (*fd < 0) return nullptr;
  const size_t rounded = std::max<size_t>(512, (size + 511) / 512 * 512);
  if (::write(*fd, data, size) != static_cast<ssize_t>(size) ||
      ::ftruncate(*fd, static_cast<off_t>(rounded)) != 0) {
    return nullptr;
  }
  auto file = vstack::Open("file:/proc/self/fd/" + std::to_string(*fd));
  if (!file) return nullptr;
  return std::move(*file);
}

enum Mode { kStrict, kForCheck, kGrowable, kDifferencing, kModes };

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vstack::fuzz::SetOneModePerInput();  // fuzz_mode.h
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (8 << 20)) return 0;
  auto runs = [&](Mode m) { return vstack::fuzz::RunsMode(data, size, m, kModes); };
  for (bool for_check : {false, true}) {
    if (!runs(for_check ? kForCheck : kStrict)) continue;
    DevicePtr mem = MemoryWith(data, size);
    if (!mem) return 0;
    vstack::vhd::VhdOptions options;
    options.for_check = for_check;
    options.reserve = size % 3 == 0 ? 0 : 1 << 20;
    auto dev = vstack::vhd::VhdDevice::Open(std::move(mem), options);
    if (!dev) continue;
    Exercise(**dev, /*write=*/!for_check);
    vstack::PropertyList props;
    (*dev)->Properties(props);
    vstack::CheckResult ro, repaired;
    (void)(*dev)->Check(vstack::CheckMode::kReadOnly, &ro);
    if (for_check) {
      (void)(*dev)->Check(vstack::CheckMode::kRepairAll, &repaired);
      Exercise(**dev, /*write=*/true);
    }
    (void)(*dev)->Close();
  }
  // Over a growable file: writes allocate past the end footer, check -r all moves it back.
  if (size <= (1 << 20) && runs(kGrowable)) {
    int fd = -1;
    if (DevicePtr file = GrowableWith(data, size, &fd)) {
      vstack::vhd::VhdOptions options;
      options.for_check = size % 2 == 0;
      options.reserve = size % 3 == 0 ? 0 : 1 << 20;
      auto dev = vstack::vhd::VhdDevice::Open(std::move(file), options);
      if (dev) {
        Exercise(**dev, /*write=*/true);
        vstack::CheckResult repaired;
        (void)(*dev)->Check(vstack::CheckMode::kRepairAll, &repaired);
        (void)(*dev)->Close();
      }
    }
    if (fd >= 0) ::close(fd);
  }
  // Differencing: the locators, and the image alone.
  if (!runs(kDifferencing)) return 0;
  if (DevicePtr mem = MemoryWith(data, size)) {
    auto img = vstack::vhd::LoadImage(*mem, /*lenient=*/true);
    if (img && img->footer.is_differencing()) {
      const auto locators = vstack::vhd::ReadLocators(*mem, *img);
      (void)vstack::vhd::ParentCandidates(locators, img->header.parent_name, "/fuzz/child.vhd");
      vstack::vhd::VhdOptions options;
      options.open_parent = false;
      auto dev = vstack::vhd::VhdDevice::Open(std::move(mem), options);
      if (dev) Exercise(**dev, /*write=*/false);
    }
  }
  return 0;
}
