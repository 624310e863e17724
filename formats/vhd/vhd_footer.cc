#include "formats/vhd/vhd_footer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "formats/vhd/vhd_field_error.h"
#include "lib/endian.h"

namespace vstack::vhd {
namespace {

// Field offsets within the footer.
constexpr size_t kCookieAt = 0, kFeaturesAt = 8, kVersionAt = 12, kDataOffsetAt = 16,
                 kTimestampAt = 24, kCreatorAppAt = 28, kCreatorVersionAt = 32, kCreatorOsAt = 36,
                 kOriginalSizeAt = 40, kCurrentSizeAt = 48, kCylindersAt = 56, kHeadsAt = 58,
                 kSectorsAt = 59, kDiskTypeAt = 60, kChecksumAt = 64, kUuidAt = 68,
                 kSavedStateAt = 84, kHiddenAt = 85;
constexpr char kCookie[8] = {'c', 'o', 'n', 'e', 'c', 't', 'i', 'x'};

Error Bad(Errc code, uint64_t at, size_t field_at, const std::string& what) {
  return FieldError(code, "VHD footer", at, field_at, what);
}

}  // namespace

std::string DiskTypeName(uint32_t type) {
  switch (type) {
    case 2:
      return "fixed";
    case 3:
      return "dynamic";
    case 4:
      return "differencing";
    default:
      return "unknown (" + std::to_string(type) + ")";
  }
}

Chs ChsForSectors(uint64_t total) {
  uint64_t ts = std::min<uint64_t>(total, 65535ull * 16 * 255);
  uint64_t s, h, ch;
  if (ts >= 65535ull * 16 * 63) {
    s = 255;
    h = 16;
    ch = ts / s;
  } else {
    s = 17;
    ch = ts / s;
    h = std::max<uint64_t>(4, (ch + 1023) / 1024);
    if (ch >= h * 1024 || h > 16) {
      s = 31;
      h = 16;
      ch = ts / s;
    }
    if (ch >= h * 1024) {
      s = 63;
      h = 16;
      ch = ts / s;
    }
  }
  return Chs{static_cast<uint16_t>(ch / h), static_cast<uint8_t>(h), static_cast<uint8_t>(s)};
}

uint64_t RoundUpToChs(uint64_t bytes, Chs* chs) {
  const uint64_t want = (bytes + kSectorSize - 1) / kSectorSize;
  // The spec geometry rounds down by less than (heads + 1) * sectors; try sector counts
  // upwards until it covers the request (a few thousand steps at most), as qemu-img does.
  Chs g;
  for (uint64_t n = want;; ++n) {
    g = ChsForSectors(n);
    if (g.TotalSectors() >= want) break;
    if (g.IsMax() || n > want + 65536) {  // saturated: CHS cannot describe this size
      *chs = kMaxChs;
      return want * kSectorSize;
    }
  }
  if (g.IsMax()) {
    *chs = kMaxChs;
    return want * kSectorSize;
  }
  *chs = g;
  return g.TotalSectors() * kSectorSize;
}

std::string Footer::CreatorText() const {
  std::string s;
  for (char c : creator_app) {
    if (c == '\0') {
      s += "\\0";
    } else if (c >= 0x20 && c < 0x7F) {
      s += c;
    } else {
      s += "\\x" + Hex(static_cast<unsigned char>(c)).substr(2);
    }
  }
  return s;
}

uint32_t VhdChecksum(std::span<const uint8_t> data, size_t checksum_offset) {
  uint32_t sum = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    if (i >= checksum_offset && i < checksum_offset + 4) continue;
    sum += data[i];
  }
  return ~sum;
}

bool HasFooterCookie(const uint8_t* p) { return std::memcmp(p, kCookie, sizeof kCookie) == 0; }

Result<Footer> ParseFooter(std::span<const uint8_t, kFooterSize> b, uint64_t at,
                           bool verify_checksum) {
  const uint8_t* p = b.data();
  if (!HasFooterCookie(p + kCookieAt)) {
    return Bad(Errc::kCorruption, at, kCookieAt, "no 'conectix' cookie");
  }
  Footer f;
  f.checksum = LoadBE32(p + kChecksumAt);
  const uint32_t computed = VhdChecksum(b, kChecksumAt);
  if (verify_checksum && computed != f.checksum) {
    // blktap sets its `hidden` byte without updating the checksum; libvhd accepts that.
    const uint32_t without_hidden = computed + p[kHiddenAt];
    if (p[kHiddenAt] == 0 || without_hidden != f.checksum) {
      return Bad(Errc::kChecksumMismatch, at, kChecksumAt,
                 "checksum mismatch: stored " + Hex(f.checksum) + ", computed " + Hex(computed));
    }
  }
  f.features = LoadBE32(p + kFeaturesAt);
  if (f.features & ~(kFeatureTemporary | kFeatureReserved)) {
    return Bad(Errc::kCorruption, at, kFeaturesAt, "unknown feature bits " + Hex(f.features));
  }
  f.version = LoadBE32(p + kVersionAt);
  if (f.version != kFormatVersion) {
    return Bad(Errc::kCorruption, at, kVersionAt,
               "unsupported format version " + Hex(f.version) + " (expected 0x10000)");
  }
  f.disk_type = LoadBE32(p + kDiskTypeAt);
  if (!f.is_fixed() && !f.is_dynamic()) {
    return Bad(Errc::kCorruption, at, kDiskTypeAt,
               "invalid disk type " + std::to_string(f.disk_type) + " (expected 2, 3 or 4)");
  }
  f.data_offset = LoadBE64(p + kDataOffsetAt);
  if (f.is_fixed()) {
    if (f.data_offset != kNoDataOffset && f.data_offset != kNoDataOffset32) {
      return Bad(
          Errc::kCorruption, at, kDataOffsetAt,
          "fixed disk has data offset " + Hex(f.data_offset) + " (expected 0xffffffffffffffff)");
    }
  } else if (f.data_offset < kSectorSize || f.data_offset % kSectorSize != 0 ||
             f.data_offset == kNoDataOffset || f.data_offset == kNoDataOffset32) {
    return Bad(Errc::kCorruption, at, kDataOffsetAt,
               "dynamic disk has invalid header offset " + Hex(f.data_offset) +
                   " (expected a sector-aligned offset >= 512)");
  }
  f.timestamp = LoadBE32(p + kTimestampAt);
  std::memcpy(f.creator_app.data(), p + kCreatorAppAt, 4);
  f.creator_version = LoadBE32(p + kCreatorVersionAt);
  f.creator_os = LoadBE32(p + kCreatorOsAt);
  f.original_size = LoadBE64(p + kOriginalSizeAt);
  f.current_size = LoadBE64(p + kCurrentSizeAt);
  if (f.current_size < kSectorSize) {
    return Bad(Errc::kCorruption, at, kCurrentSizeAt,
               "current size " + std::to_string(f.current_size) + " is below one sector");
  }
  if (f.is_dynamic() && f.current_size > kMaxDynamicSize) {
    return Bad(Errc::kCorruption, at, kCurrentSizeAt,
               "current size " + std::to_string(f.current_size) +
                   " exceeds the 2040 GiB limit of dynamic disks");
  }
  f.geometry.cylinders = LoadBE16(p + kCylindersAt);
  f.geometry.heads = p[kHeadsAt];
  f.geometry.sectors = p[kSectorsAt];
  std::memcpy(f.uuid.data(), p + kUuidAt, 16);
  f.saved_state = p[kSavedStateAt];
  f.hidden = p[kHiddenAt];
  return f;
}

std::vector<std::string> FooterWarnings(const Footer& f, uint64_t at) {
  std::vector<std::string> w;
  auto add = [&](size_t field_at, const std::string& what) {
    w.push_back("VHD footer at offset " + std::to_string(at) + ": " + what + " (field at offset " +
                std::to_string(at + field_at) + ")");
  };
  if (!(f.features & kFeatureReserved)) add(kFeaturesAt, "reserved feature bit 0x2 is not set");
  if (f.saved_state > 1) {
    add(kSavedStateAt, "saved state is " + std::to_string(f.saved_state) + " (expected 0 or 1)");
  }
  if (!f.geometry.IsMax() && f.geometry.TotalSectors() * kSectorSize > f.current_size) {
    add(kCylindersAt, "geometry " + std::to_string(f.geometry.cylinders) + "/" +
                          std::to_string(f.geometry.heads) + "/" +
                          std::to_string(f.geometry.sectors) + " covers more than the " +
                          std::to_string(f.current_size) + "-byte current size");
  }
  if (f.uuid == std::array<uint8_t, 16>{}) add(kUuidAt, "unique id is all zeros");
  const uint64_t now = static_cast<uint64_t>(std::time(nullptr));
  if (now > kVhdEpoch && f.timestamp > now - kVhdEpoch + 86400) {
    add(kTimestampAt, "time stamp is in the future");
  }
  if (f.current_size % kSectorSize != 0) {
    add(kCurrentSizeAt, "current size " + std::to_string(f.current_size) +
                            " is not a multiple of 512; the last partial sector is ignored");
  }
  return w;
}

void SerializeFooter(const Footer& f, std::span<uint8_t, kFooterSize> out) {
  uint8_t* p = out.data();
  std::memset(p, 0, kFooterSize);
  std::memcpy(p + kCookieAt, kCookie, sizeof kCookie);
  StoreBE32(p + kFeaturesAt, f.features);
  StoreBE32(p + kVersionAt, f.version);
  StoreBE64(p + kDataOffsetAt, f.data_offset);
  StoreBE32(p + kTimestampAt, f.timestamp);
  std::memcpy(p + kCreatorAppAt, f.creator_app.data(), 4);
  StoreBE32(p + kCreatorVersionAt, f.creator_version);
  StoreBE32(p + kCreatorOsAt, f.creator_os);
  StoreBE64(p + kOriginalSizeAt, f.original_size);
  StoreBE64(p + kCurrentSizeAt, f.current_size);
  StoreBE16(p + kCylindersAt, f.geometry.cylinders);
  p[kHeadsAt] = f.geometry.heads;
  p[kSectorsAt] = f.geometry.sectors;
  StoreBE32(p + kDiskTypeAt, f.disk_type);
  std::memcpy(p + kUuidAt, f.uuid.data(), 16);
  p[kSavedStateAt] = f.saved_state;
  p[kHiddenAt] = f.hidden;
  StoreBE32(p + kChecksumAt, VhdChecksum(out, kChecksumAt));
}

std::string UuidText(const std::array<uint8_t, 16>& u) {
  char buf[40];
  std::snprintf(buf, sizeof buf,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                u[15]);
  return buf;
}

}  // namespace vstack::vhd
