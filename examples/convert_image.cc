// Example 4: the image tools as library calls. Writes a pattern into a memory disk, converts it
// into a new dynamic VHD with ConvertImage (what `vstack convert -O vhd` does), showing the
// progress callback, then reopens the VHD and checks it with CompareImages (`vstack compare`).
//
//   convert_image [PATH]     (default: ./vstack-converted.vhd; the file is replaced)
#include <vstack/imagetools/compare.h>
#include <vstack/imagetools/convert.h>
#include <vstack/registry.h>
#include <vstack/sync_io.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

constexpr uint64_t kDiskSize = 64ull << 20;

int Fail(const std::string& what, const std::string& why) {
  std::fprintf(stderr, "convert_image: %s: %s\n", what.c_str(), why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "vstack-converted.vhd";

  auto source = vstack::Open("memory:" + std::to_string(kDiskSize));
  if (!source) return Fail("open memory", source.error().ToString());
  {
    vstack::SyncIo io(**source);
    std::vector<std::byte> buf(1 << 20);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = std::byte(i * 7 + 1);
    // 1 MiB of data every 8 MiB: the VHD allocates 8 of its 32 2-MiB blocks.
    for (uint64_t off = 0; off < kDiskSize; off += 8 << 20) {
      if (auto ec = io.Write(off, buf)) return Fail("write", ec.message());
    }
  }

  vstack::ConvertOptions options;
  options.format = "vhd";
  options.create_options = "subformat=dynamic";
  options.overwrite = true;
  uint64_t reports = 0;
  options.progress = [&reports](uint64_t done, uint64_t total) {
    if (++reports % 8 == 0 || done == total) {
      std::printf("  %3llu%%  %llu of %llu bytes\n",
                  static_cast<unsigned long long>(done * 100 / total),
                  static_cast<unsigned long long>(done), static_cast<unsigned long long>(total));
    }
  };
  auto copied = vstack::ConvertImage(**source, path, options);
  if (!copied) return Fail("convert", copied.error().ToString());
  std::printf("converted memory:64M into %s: %llu bytes of data written\n", path.c_str(),
              static_cast<unsigned long long>(copied->written));

  auto image = vstack::OpenImage(path, {.read_only = true});
  if (!image) return Fail("reopen " + path, image.error().ToString());
  auto same = vstack::CompareImages(**source, **image);
  if (!same) return Fail("compare", same.error().ToString());
  if (!same->identical) {
    return Fail("compare",
                "differs at offset " + std::to_string(same->first_difference.value_or(0)));
  }
  std::printf("%s (%s) is identical to the source\n", path.c_str(), (*image)->Describe().c_str());
  return 0;
}
