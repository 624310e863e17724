// The VHD hard-disk footer (512 bytes, big-endian): parsing with validation of every field,
// serialisation with the checksum, and the CHS geometry rules. See docs/layers/vhd.md and the
// 2006 VHD specification; every error names the field and the byte offset in the file.
#ifndef VSTACK_FORMATS_VHD_VHD_FOOTER_H_
#define VSTACK_FORMATS_VHD_VHD_FOOTER_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lib/errors.h"

namespace vstack::vhd {

inline constexpr uint32_t kSectorSize = 512;
inline constexpr uint32_t kFooterSize = 512;
inline constexpr uint64_t kNoDataOffset = UINT64_MAX;    // "none", as everybody writes it
inline constexpr uint64_t kNoDataOffset32 = 0xFFFFFFFF;  // "none", as the spec text says
inline constexpr uint32_t kFormatVersion = 0x00010000;
inline constexpr uint32_t kFeatureTemporary = 0x1;
inline constexpr uint32_t kFeatureReserved = 0x2;  // must be set
// Dynamic and differencing disks are at most 2040 GiB (BAT entries are 32-bit sector numbers).
inline constexpr uint64_t kMaxDynamicSize = 0xFF000000ull * kSectorSize;
// Seconds between the Unix epoch and the VHD epoch (2000-01-01 00:00:00 UTC).
inline constexpr uint64_t kVhdEpoch = 946684800;

enum class DiskType : uint32_t { kFixed = 2, kDynamic = 3, kDifferencing = 4 };
std::string DiskTypeName(uint32_t type);

// Cylinders / heads / sectors per track.
struct Chs {
  uint16_t cylinders = 0;
  uint8_t heads = 0;
  uint8_t sectors = 0;
  uint64_t TotalSectors() const { return uint64_t{cylinders} * heads * sectors; }
  bool IsMax() const { return cylinders == 65535 && heads == 16 && sectors == 255; }
  bool operator==(const Chs&) const = default;
};
inline constexpr Chs kMaxChs{65535, 16, 255};

// The specification's geometry for `sectors` (it rounds down and saturates at 65535/16/255).
Chs ChsForSectors(uint64_t sectors);
// The smallest size >= `bytes` whose spec geometry covers it exactly, as qemu-img creates
// (so that readers sizing by CHS and readers sizing by current_size agree); `chs` receives the
// geometry. Sizes beyond what CHS can express keep their sector-rounded size and get the
// maximum geometry.
uint64_t RoundUpToChs(uint64_t bytes, Chs* chs);

struct Footer {
  uint32_t features = kFeatureReserved;
  uint32_t version = kFormatVersion;
  uint64_t data_offset = kNoDataOffset;
  uint32_t timestamp = 0;  // seconds since 2000-01-01 UTC
  std::array<char, 4> creator_app{};
  uint32_t creator_version = 0;  // major << 16 | minor
  uint32_t creator_os = 0;
  uint64_t original_size = 0;
  uint64_t current_size = 0;
  Chs geometry;
  uint32_t disk_type = 0;
  uint32_t checksum = 0;  // as stored; Serialize computes it
  std::array<uint8_t, 16> uuid{};
  uint8_t saved_state = 0;
  uint8_t hidden = 0;  // blktap's flag in the first reserved byte

  bool is_fixed() const { return disk_type == static_cast<uint32_t>(DiskType::kFixed); }
  // Dynamic and differencing disks share the sparse layout (header, BAT, blocks).
  bool is_dynamic() const {
    return disk_type == static_cast<uint32_t>(DiskType::kDynamic) || is_differencing();
  }
  bool is_differencing() const {
    return disk_type == static_cast<uint32_t>(DiskType::kDifferencing);
  }
  // "vpc ", "qemu", "tap\0" printed with NULs as "\0".
  std::string CreatorText() const;
};

// The VHD checksum: the one's complement of the byte sum of `data`, counting the four bytes at
// `checksum_offset` as zero.
uint32_t VhdChecksum(std::span<const uint8_t> data, size_t checksum_offset);

// Parses a footer found at file offset `at` (used in messages). Validates what decides how the
// image is read: cookie, checksum (also accepting blktap's unchecksummed `hidden` byte),
// feature bits, version, disk type, data offset and current size. A pre-2004 511-byte footer
// is passed with a zero last byte. Errors are kCorruption, kChecksumMismatch or kNotSupported
// (differencing disks) and name the field and its offset.
// With `verify_checksum` false a checksum mismatch is ignored (for `vstack check`, which
// reports it separately).
Result<Footer> ParseFooter(std::span<const uint8_t, kFooterSize> bytes, uint64_t at,
                           bool verify_checksum = true);

// Informational fields that are wrong but do not change how data is read (a missing reserved
// feature bit, a saved-state value other than 0/1, a geometry larger than the size, a null
// UUID, a time stamp in the future): one message each, for `vstack check`.
std::vector<std::string> FooterWarnings(const Footer& f, uint64_t at);

// True if the 8 bytes at `p` are the footer cookie "conectix".
bool HasFooterCookie(const uint8_t* p);

// Writes `f` into `out` with a freshly computed checksum (f.checksum is ignored).
void SerializeFooter(const Footer& f, std::span<uint8_t, kFooterSize> out);

// "f8a3…-…" in RFC 4122 text order (the 16 bytes as stored).
std::string UuidText(const std::array<uint8_t, 16>& uuid);

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_FOOTER_H_
