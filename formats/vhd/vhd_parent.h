// Differencing VHDs (disk type 4): how a child names its parent, and opening the chain.
//
// A child names its parent three ways: the parent unique ID and time stamp in its header
// (which must match the parent's footer), the parent's file name (UTF-16 big-endian) in the
// header, and up to eight parent locators whose data lies in the file: W2ru (a Windows path
// relative to the child, UTF-16 little-endian), W2ku (an absolute path, UTF-16LE) and MacX (a
// UTF-8 file:// URL). docs/layers/vhd.md, "Differencing disks", describes the rules.
//
// Memory is bounded by the file: locator data is read only if it lies inside the file and is
// at most kMaxLocatorBytes long; a chain is at most kMaxChainDepth images deep.
#ifndef VSTACK_FORMATS_VHD_VHD_PARENT_H_
#define VSTACK_FORMATS_VHD_VHD_PARENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "formats/vhd/vhd_device.h"
#include "formats/vhd/vhd_image.h"
#include "lib/block_device.h"

namespace vstack::vhd {

inline constexpr uint32_t kLocatorW2ru = 0x57327275;  // "W2ru": relative Windows path
inline constexpr uint32_t kLocatorW2ku = 0x57326B75;  // "W2ku": absolute Windows path
inline constexpr uint32_t kLocatorMacX = 0x4D616358;  // "MacX": file:// URL, UTF-8
inline constexpr uint32_t kMaxLocatorBytes = 64 * 1024;
inline constexpr size_t kMaxChainDepth = 128;  // images in one chain, the top included

// One parent locator, decoded.
struct LocatorPath {
  uint32_t code = 0;  // kLocatorW2ru, ...
  std::string path;   // UTF-8, '/' separators; empty if unusable
  std::string problem;  // why it is unusable (outside the file, bad encoding...)
};

// The platform code as text: "W2ru", "MacX"...
std::string LocatorCodeName(uint32_t code);
// The size in bytes of a locator's data space (the spec says sectors, writers use bytes:
// values below 512 are sectors, as blktap reads them).
uint64_t LocatorSpaceBytes(const ParentLocator& l);

// Decodes UTF-16 (big- or little-endian) to UTF-8, stopping at a NUL. Unpaired surrogates
// become U+FFFD.
std::string Utf16ToUtf8(const uint8_t* data, size_t bytes, bool big_endian);
std::string Utf16ToUtf8(const std::u16string& s);
std::u16string Utf8ToUtf16(const std::string& s);

// Reads and decodes the locators of `image` (a differencing disk) from `device`.
std::vector<LocatorPath> ReadLocators(BlockDevice& device, const VhdImage& image);

// Where to look for the parent of a child stored at `child_path`, in order: W2ru relative to
// the child's directory, W2ku, MacX, then the header's parent name in the child's directory.
// Windows separators become '/'; duplicates are dropped.
std::vector<std::string> ParentCandidates(const std::vector<LocatorPath>& locators,
                                          const std::u16string& parent_name,
                                          const std::string& child_path);

// Checks a parent's footer against the child's header under `check`. The error names both
// values.
Status CheckParentLink(const DynamicHeader& child, const Footer& parent, ParentCheck check,
                       const std::string& parent_what);

// What a new child records about its parent (vstack create -b).
struct NewParentLink {
  std::array<uint8_t, 16> uuid{};
  uint32_t timestamp = 0;
  std::u16string name;  // the parent's file name
  struct Entry {
    uint32_t code;
    std::vector<uint8_t> data;  // encoded path, padded to a whole sector when written
  };
  std::vector<Entry> entries;  // W2ku, W2ru, MacX
};

// The link from a child at `child_path` to `parent_path` (both absolute or relative to the
// current directory), whose footer is `parent`.
NewParentLink MakeParentLink(const std::string& parent_path, const std::string& child_path,
                             const Footer& parent);

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_PARENT_H_
