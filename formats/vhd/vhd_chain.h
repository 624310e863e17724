// Opening the parent of a differencing VHD: found through an explicit parent stack
// (vhd:parent=SPEC) or the child's locators and parent name (vhd_parent.h), opened read-only
// with the child's options, and checked against the child's header. Loops and chains deeper
// than kMaxChainDepth are errors.
#ifndef VSTACK_FORMATS_VHD_VHD_CHAIN_H_
#define VSTACK_FORMATS_VHD_VHD_CHAIN_H_

#include "formats/vhd/vhd_device.h"

namespace vstack::vhd {

// Opens the parent of the differencing disk `image`, stored on `lower`. The result is a
// VhdDevice (itself possibly differencing, with its own parent).
Result<DevicePtr> OpenParent(BlockDevice& lower, const VhdImage& image, const VhdOptions& options);

// A stable name for the file at `path`, to tell whether two paths name one file: its canonical
// path if it exists, else `path`.
std::string FileIdentity(const std::string& path);

// The path of the file under `device` (its "path" property), or "" for a device without one.
std::string DevicePath(const BlockDevice& device);

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_CHAIN_H_
