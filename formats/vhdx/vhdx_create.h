// Creating VHDX images: `vstack create -f vhdx -o OPTIONS FILE SIZE`, CreateImage("vhdx", ...),
// or an image written onto any device (a memory device in tests).
//
// Options (qemu-img's names where it has them):
//   subformat=dynamic|fixed     default dynamic
//   block_size=0                0: qemu-img's choice (8M up to 1 GiB, 16M up to 100 GiB,
//                               32M up to 32 TiB, 64M above); else a power of two 1M..256M
//   log_size=1M                 a multiple of 1 MiB
//   block_state_zero=off        on: payload blocks start in state ZERO (fixed: with their
//                               space reserved) instead of NOT_PRESENT / FULLY_PRESENT
//   logical_sector_size=512     512 or 4096 (vstack's; qemu-img always writes 512)
//   physical_sector_size=4096   512 or 4096
//
// Layout: identifier, headers and region tables in the first 1 MiB, the log at 1 MiB, the
// metadata region after it (1 MiB), then the BAT region, then (fixed) every block in order.
#ifndef VSTACK_FORMATS_VHDX_VHDX_CREATE_H_
#define VSTACK_FORMATS_VHDX_VHDX_CREATE_H_

#include <string>
#include <vector>

#include "lib/block_device.h"
#include "lib/registry.h"

namespace vstack::vhdx {

struct CreateParams {
  uint64_t size = 0;
  bool fixed = false;
  uint32_t block_size = 0;  // 0: chosen from the size
  uint32_t log_size = 1 << 20;
  bool block_state_zero = false;
  uint32_t logical_sector = 512;
  uint32_t physical_sector = 4096;
};

std::vector<OptionInfo> CreateOptionInfos();
// Checks the options; errors name the option.
Result<CreateParams> ParseCreateParams(uint64_t size, const OptionValues& options);
// The block size qemu-img picks for `size` when block_size=0.
uint32_t DefaultBlockSize(uint64_t size);
// The bytes a new image occupies (metadata, and every block of a fixed image).
uint64_t NewImageFileSize(const CreateParams& p);
// Writes a new image onto `device` (at least NewImageFileSize bytes).
Status WriteNewImage(BlockDevice& device, const CreateParams& p);
// Creates the file `path` (O_EXCL: never an existing file or symlink) holding a new image and
// returns it, open for writing on the creating descriptor; removes it on failure.
Result<DevicePtr> CreateImageFile(const std::string& path, const CreateParams& p);

}  // namespace vstack::vhdx

#endif  // VSTACK_FORMATS_VHDX_VHDX_CREATE_H_
