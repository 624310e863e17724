// Creating VHD images: `vstack create -f vhd -o OPTIONS FILE SIZE`, CreateImage("vhd", ...),
// or an image written onto any device (a memory device in tests).
//
// Options (create_options of the `vhd` component):
//   subformat=dynamic|fixed    default dynamic
//   block_size=2M              dynamic only: 512K..64M, a power of two
//   force_size=off|on          off: round the size up until the CHS geometry covers it
//                              exactly, as qemu-img does, so readers that size by geometry
//                              (older qemu) and by current_size agree; on: keep the size
//                              (rounded to a sector) and write the maximum geometry
//                              65535/16/255, which every reader takes to mean current_size
//   creator=vstk               creator application, 1-4 characters (padded with spaces)
//   creator_version=0.1        MAJOR.MINOR
//   creator_os=Wi2k            host OS code, 4 characters
//   backing_file=PATH          a differencing disk over the VHD at PATH (relative to the new
//                              image's directory), as qemu-img create -b; the size may be 0
//                              to take the parent's
//   backing_fmt=vhd            the parent's format (only vhd)
//   preallocate=off|metadata|falloc|full
//                              dynamic: allocate every block (bitmaps all set) and leave the
//                              data sparse, fallocate it, or write zeros; fixed: the data area
//                              sparse (off, metadata), fallocated, or written with zeros
#ifndef VSTACK_FORMATS_VHD_VHD_CREATE_H_
#define VSTACK_FORMATS_VHD_VHD_CREATE_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "formats/vhd/vhd_footer.h"
#include "formats/vhd/vhd_header.h"
#include "formats/vhd/vhd_parent.h"
#include "lib/block_device.h"
#include "lib/registry.h"

namespace vstack::vhd {

enum class Preallocate { kOff, kMetadata, kFalloc, kFull };

struct CreateParams {
  uint64_t requested_size = 0;
  bool dynamic = true;
  uint32_t block_size = kDefaultBlockSize;
  bool force_size = false;
  std::array<char, 4> creator{'v', 's', 't', 'k'};
  uint32_t creator_version = 0x00000001;  // 0.1
  uint32_t creator_os = 0x5769326B;       // "Wi2k"
  Preallocate preallocate = Preallocate::kOff;
  std::string backing_file;  // as given; CreateImageFile resolves it into `parent`
  // Differencing disks: what the child records about its parent.
  std::optional<NewParentLink> parent;
};

std::vector<OptionInfo> CreateOptionInfos();
// Checks the options; errors name the option.
Result<CreateParams> ParseCreateParams(uint64_t size, const OptionValues& options);

// The footer (and, for dynamic disks, the header) a new image gets, with its final size.
Footer NewFooter(const CreateParams& p);
// The bytes a new image occupies in a file (footer copy, header, BAT, preallocated blocks,
// footer).
uint64_t NewImageFileSize(const CreateParams& p);

// Writes a new image onto `device`, whose last 512 bytes receive the footer. For a file,
// size the device to NewImageFileSize first; a bigger fixed-size device (memory) keeps its
// free space between the structures and the footer.
Status WriteNewImage(BlockDevice& device, const CreateParams& p);

// Opens p.backing_file (relative to the directory of `path`) read-only and records the link
// to it in p.parent; a size of 0 becomes the parent's virtual size.
Status LinkToParent(const std::string& path, CreateParams* p);

// Creates the file `path` (O_EXCL: never an existing file or symlink) holding a new image and
// returns it, open for writing on the creating descriptor; removes it on failure.
// A differencing image (p.backing_file) is linked to its parent first (LinkToParent).
Result<DevicePtr> CreateImageFile(const std::string& path, const CreateParams& p);

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_CREATE_H_
