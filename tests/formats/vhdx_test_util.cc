#include "tests/formats/vhdx_test_util.h"

#include <cstring>

#include "formats/vhdx/vhdx_device.h"
#include "formats/vhdx/vhdx_format.h"
#include "lib/registry.h"
#include "lib/spec.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {

vhdx::CreateParams VhdxParams(uint64_t size, const std::string& options) {
  const ComponentInfo* c = Registry::Global().Find("vhdx");
  std::vector<SpecOption> given;
  if (!options.empty()) {
    auto parts = ParseSpec("vhdx:" + options);
    EXPECT_TRUE(parts.has_value()) << options;
    if (parts) given = (*parts)[0].options;
  }
  OptionValues values("vhdx", "", given, &c->create_options);
  auto p = vhdx::ParseCreateParams(size, values);
  EXPECT_TRUE(IsOk(p));
  return p ? *p : vhdx::CreateParams{};
}

Result<DevicePtr> MemoryVhdx(uint64_t size, const std::string& options, uint64_t device_size) {
  const vhdx::CreateParams p = VhdxParams(size, options);
  const uint64_t file = vhdx::NewImageFileSize(p);
  VSTACK_ASSIGN_OR_RETURN(DevicePtr mem,
                          Open("memory:" + std::to_string(device_size ? device_size : file)));
  VSTACK_RETURN_IF_ERROR(vhdx::WriteNewImage(*mem, p));
  return vhdx::VhdxDevice::Open(std::move(mem));
}

uint64_t VhdxBatEntryOffset(const std::vector<unsigned char>& file, uint64_t block) {
  // Region table 1: find the BAT region; metadata: block size and logical sector size.
  auto le32 = [&](uint64_t at) {
    uint32_t v;
    std::memcpy(&v, &file[at], 4);
    return v;
  };
  auto le64 = [&](uint64_t at) {
    uint64_t v;
    std::memcpy(&v, &file[at], 8);
    return v;
  };
  uint64_t bat = 0, meta = 0;
  const uint64_t rt = vhdx::kRegionTableOffset[0];
  for (uint32_t i = 0; i < le32(rt + 8); ++i) {
    vhdx::Guid g;
    std::memcpy(g.bytes.data(), &file[rt + 16 + 32 * i], 16);
    if (g == vhdx::kBatRegionGuid) bat = le64(rt + 16 + 32 * i + 16);
    if (g == vhdx::kMetadataRegionGuid) meta = le64(rt + 16 + 32 * i + 16);
  }
  uint32_t block_size = 0, sector = 0;
  for (uint32_t i = 0; i < static_cast<uint16_t>(le32(meta + 8) >> 16); ++i) {
    vhdx::Guid g;
    std::memcpy(g.bytes.data(), &file[meta + 32 + 32 * i], 16);
    const uint32_t off = le32(meta + 32 + 32 * i + 16);
    if (g == vhdx::kFileParametersGuid) block_size = le32(meta + off);
    if (g == vhdx::kLogicalSectorSizeGuid) sector = le32(meta + off);
  }
  const uint64_t ratio = (8ull << 20) * sector / block_size;
  return bat + 8 * (block + block / ratio);
}

uint64_t VhdxBatEntry(const std::vector<unsigned char>& file, uint64_t block) {
  uint64_t v;
  std::memcpy(&v, &file[VhdxBatEntryOffset(file, block)], 8);
  return v;
}

}  // namespace vstack::testing
