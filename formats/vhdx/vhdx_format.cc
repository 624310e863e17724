#include "formats/vhdx/vhdx_format.h"

#include <isa-l/crc.h>

#include <cstdio>
#include <cstring>

#include "lib/endian.h"
#include "lib/entropy.h"

namespace vstack::vhdx {
namespace {

uint16_t LoadLE16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
void StoreLE16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

Guid LoadGuid(const uint8_t* p) {
  Guid g;
  std::memcpy(g.bytes.data(), p, 16);
  return g;
}
void StoreGuid(uint8_t* p, const Guid& g) { std::memcpy(p, g.bytes.data(), 16); }

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

Error Corrupt(uint64_t offset, const std::string& what) {
  return MakeError(Errc::kCorruption, "vhdx: " + what + " (at offset " + Hex(offset) + ")");
}

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

constexpr char kRegionSignature[] = "regi";
constexpr char kHeaderSignature[] = "head";
constexpr char kMetadataSignature[] = "metadata";

}  // namespace

Guid Guid::FromFields(uint32_t d1, uint16_t d2, uint16_t d3, uint64_t d4) {
  Guid g;
  StoreLE32(g.bytes.data(), d1);
  StoreLE16(g.bytes.data() + 4, d2);
  StoreLE16(g.bytes.data() + 6, d3);
  StoreBE64(g.bytes.data() + 8, d4);
  return g;
}

Guid Guid::Random() {
  Guid g;
  for (size_t i = 0; i < 16; i += 8) {
    const uint64_t r = RandomBits64();
    std::memcpy(g.bytes.data() + i, &r, 8);
  }
  g.bytes[7] = static_cast<uint8_t>((g.bytes[7] & 0x0F) | 0x40);  // data3's high nibble: v4
  g.bytes[8] = static_cast<uint8_t>((g.bytes[8] & 0x3F) | 0x80);
  return g;
}

bool Guid::IsZero() const {
  for (uint8_t b : bytes) {
    if (b != 0) return false;
  }
  return true;
}

std::string Guid::Text() const {
  char buf[40];
  const uint8_t* b = bytes.data();
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x", LoadLE32(b),
                LoadLE16(b + 4), LoadLE16(b + 6), b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return buf;
}

const Guid kBatRegionGuid = Guid::FromFields(0x2DC27766, 0xF623, 0x4200, 0x9D64115E9BFD4A08);
const Guid kMetadataRegionGuid = Guid::FromFields(0x8B7CA206, 0x4790, 0x4B9A, 0xB8FE575F050F886E);
const Guid kFileParametersGuid = Guid::FromFields(0xCAA16737, 0xFA36, 0x4D43, 0xB3B633F0AA44E76B);
const Guid kVirtualDiskSizeGuid = Guid::FromFields(0x2FA54224, 0xCD1B, 0x4876, 0xB2115DBED83BF4B8);
const Guid kPage83DataGuid = Guid::FromFields(0xBECA12AB, 0xB2E6, 0x4523, 0x93EFC309E000C746);
const Guid kLogicalSectorSizeGuid =
    Guid::FromFields(0x8141BF1D, 0xA96F, 0x4709, 0xBA47F233A8FAAB5F);
const Guid kPhysicalSectorSizeGuid =
    Guid::FromFields(0xCDA348C7, 0x445D, 0x4471, 0x9CC9E9885251C556);
const Guid kParentLocatorGuid = Guid::FromFields(0xA8D35F2D, 0xB30B, 0x454D, 0xABF7D3D84834AB0C);

uint32_t Checksum(std::span<const uint8_t> data, size_t checksum_offset) {
  // crc32_iscsi works on the un-inverted register; the standard CRC-32C starts and ends
  // inverted.
  static const uint8_t kZeros[4] = {};
  auto* p = const_cast<uint8_t*>(data.data());
  uint32_t reg = crc32_iscsi(p, static_cast<int>(checksum_offset), 0xFFFFFFFF);
  reg = crc32_iscsi(const_cast<uint8_t*>(kZeros), 4, reg);
  reg = crc32_iscsi(p + checksum_offset + 4, static_cast<int>(data.size() - checksum_offset - 4),
                    reg);
  return ~reg;
}

std::array<uint8_t, kHeaderSize> EncodeHeader(const Header& h) {
  std::array<uint8_t, kHeaderSize> b{};
  std::memcpy(b.data(), kHeaderSignature, 4);
  StoreLE64(b.data() + 8, h.sequence);
  StoreGuid(b.data() + 16, h.file_write);
  StoreGuid(b.data() + 32, h.data_write);
  StoreGuid(b.data() + 48, h.log_guid);
  StoreLE16(b.data() + 64, h.log_version);
  StoreLE16(b.data() + 66, h.version);
  StoreLE32(b.data() + 68, h.log_length);
  StoreLE64(b.data() + 72, h.log_offset);
  StoreLE32(b.data() + 4, Checksum(b, 4));
  return b;
}

Result<Header> DecodeHeader(std::span<const uint8_t, kHeaderSize> b, uint64_t at,
                            uint64_t file_size) {
  if (std::memcmp(b.data(), kHeaderSignature, 4) != 0) {
    return Corrupt(at, "header signature is not 'head'");
  }
  const uint32_t stored = LoadLE32(b.data() + 4);
  const uint32_t computed = Checksum(b, 4);
  if (stored != computed) {
    return MakeError(Errc::kChecksumMismatch, "vhdx: header checksum " + Hex(stored) +
                                                  " does not match the computed " + Hex(computed) +
                                                  " (at offset " + Hex(at + 4) + ")");
  }
  Header h;
  h.sequence = LoadLE64(b.data() + 8);
  h.file_write = LoadGuid(b.data() + 16);
  h.data_write = LoadGuid(b.data() + 32);
  h.log_guid = LoadGuid(b.data() + 48);
  h.log_version = LoadLE16(b.data() + 64);
  h.version = LoadLE16(b.data() + 66);
  h.log_length = LoadLE32(b.data() + 68);
  h.log_offset = LoadLE64(b.data() + 72);
  if (h.version != 1) {
    return Corrupt(at + 66, "header version " + std::to_string(h.version) + " is not 1");
  }
  if (h.log_version != 0) {
    return Corrupt(at + 64, "log version " + std::to_string(h.log_version) + " is not 0");
  }
  if (h.log_length == 0 || h.log_length % kMiB != 0) {
    return Corrupt(at + 68, "log length " + std::to_string(h.log_length) +
                                " is not a positive multiple of 1 MiB");
  }
  if (h.log_offset < kMiB || h.log_offset % kMiB != 0 || h.log_offset > file_size ||
      h.log_length > file_size - h.log_offset) {
    return Corrupt(at + 72, "log at " + Hex(h.log_offset) + " (+" + Hex(h.log_length) +
                                ") is not 1 MiB-aligned inside the file of " +
                                std::to_string(file_size) + " bytes");
  }
  return h;
}

std::vector<uint8_t> EncodeRegionTable(const std::vector<Region>& regions) {
  std::vector<uint8_t> b(kRegionTableSize, 0);
  std::memcpy(b.data(), kRegionSignature, 4);
  StoreLE32(b.data() + 8, static_cast<uint32_t>(regions.size()));
  for (size_t i = 0; i < regions.size(); ++i) {
    uint8_t* e = b.data() + 16 + 32 * i;
    StoreGuid(e, regions[i].id);
    StoreLE64(e + 16, regions[i].offset);
    StoreLE32(e + 24, regions[i].length);
    StoreLE32(e + 28, regions[i].required ? 1 : 0);
  }
  StoreLE32(b.data() + 4, Checksum(b, 4));
  return b;
}

Result<std::vector<Region>> DecodeRegionTable(std::span<const uint8_t> b, uint64_t at,
                                              uint64_t file_size) {
  if (std::memcmp(b.data(), kRegionSignature, 4) != 0) {
    return Corrupt(at, "region table signature is not 'regi'");
  }
  const uint32_t stored = LoadLE32(b.data() + 4);
  const uint32_t computed = Checksum(b.first(kRegionTableSize), 4);
  if (stored != computed) {
    return MakeError(Errc::kChecksumMismatch, "vhdx: region table checksum " + Hex(stored) +
                                                  " does not match the computed " + Hex(computed) +
                                                  " (at offset " + Hex(at + 4) + ")");
  }
  const uint32_t count = LoadLE32(b.data() + 8);
  if (count > kMaxTableEntries) {
    return Corrupt(at + 8, "region table has " + std::to_string(count) + " entries (at most 2047)");
  }
  std::vector<Region> regions;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = b.data() + 16 + 32 * i;
    const uint64_t eat = at + 16 + 32 * i;
    Region r;
    r.id = LoadGuid(e);
    r.offset = LoadLE64(e + 16);
    r.length = LoadLE32(e + 24);
    r.required = (LoadLE32(e + 28) & 1) != 0;
    const bool known = r.id == kBatRegionGuid || r.id == kMetadataRegionGuid;
    if (!known) {
      if (r.required) {
        return MakeError(Errc::kNotSupported, "vhdx: region " + r.id.Text() +
                                                  " is required but unknown to vstack (at "
                                                  "offset " +
                                                  Hex(eat) + ")");
      }
      continue;
    }
    for (const Region& o : regions) {
      if (o.id == r.id) return Corrupt(eat, "region " + r.id.Text() + " appears twice");
    }
    if (r.offset < kMiB || r.offset % kMiB != 0 || r.length == 0 || r.length % kMiB != 0 ||
        r.offset > file_size || r.length > file_size - r.offset) {
      return Corrupt(eat + 16, "region " + r.id.Text() + " at " + Hex(r.offset) + " (+" +
                                   Hex(r.length) + ") is not 1 MiB-aligned inside the file of " +
                                   std::to_string(file_size) + " bytes");
    }
    regions.push_back(r);
  }
  return regions;
}

std::vector<uint8_t> EncodeMetadata(const Metadata& m) {
  std::vector<uint8_t> b(kMetadataTableSize + 4096, 0);
  std::memcpy(b.data(), kMetadataSignature, 8);
  struct Item {
    const Guid* id;
    uint32_t length;
    uint32_t flags;  // bit 1 IsVirtualDisk, bit 2 IsRequired
  };
  const Item items[] = {{&kFileParametersGuid, 8, 4},
                        {&kVirtualDiskSizeGuid, 8, 6},
                        {&kPage83DataGuid, 16, 6},
                        {&kLogicalSectorSizeGuid, 4, 6},
                        {&kPhysicalSectorSizeGuid, 4, 6}};
  StoreLE16(b.data() + 10, 5);
  uint32_t value_offset = kMetadataTableSize;
  for (size_t i = 0; i < 5; ++i) {
    uint8_t* e = b.data() + 32 + 32 * i;
    StoreGuid(e, *items[i].id);
    StoreLE32(e + 16, value_offset);
    StoreLE32(e + 20, items[i].length);
    StoreLE32(e + 24, items[i].flags);
    uint8_t* v = b.data() + value_offset;
    if (i == 0) {
      StoreLE32(v, m.block_size);
      StoreLE32(v + 4, (m.leave_blocks_allocated ? 1u : 0u) | (m.has_parent ? 2u : 0u));
    } else if (i == 1) {
      StoreLE64(v, m.virtual_size);
    } else if (i == 2) {
      StoreGuid(v, m.page83);
    } else if (i == 3) {
      StoreLE32(v, m.logical_sector);
    } else {
      StoreLE32(v, m.physical_sector);
    }
    value_offset += items[i].length;
  }
  return b;
}

Result<Metadata> DecodeMetadata(std::span<const uint8_t> b, uint64_t at, uint32_t region_length) {
  if (b.size() < kMetadataTableSize || std::memcmp(b.data(), kMetadataSignature, 8) != 0) {
    return Corrupt(at, "metadata table signature is not 'metadata'");
  }
  const uint16_t count = LoadLE16(b.data() + 10);
  if (count > kMaxTableEntries) {
    return Corrupt(at + 10,
                   "metadata table has " + std::to_string(count) + " entries (at most 2047)");
  }
  Metadata m;
  enum { kParams, kSize, kPage83, kLogical, kPhysical, kItems };
  bool seen[kItems] = {};
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = b.data() + 32 + 32 * i;
    const uint64_t eat = at + 32 + 32 * i;
    const Guid id = LoadGuid(e);
    const uint32_t offset = LoadLE32(e + 16);
    const uint32_t length = LoadLE32(e + 20);
    const uint32_t flags = LoadLE32(e + 24);
    if (length == 0 && offset == 0) continue;  // an empty item
    if (offset < kMetadataTableSize || offset > region_length || length > region_length - offset) {
      return Corrupt(eat + 16, "metadata item " + id.Text() + " at " + Hex(offset) + " (+" +
                                   std::to_string(length) + ") lies outside its region");
    }
    int which = -1;
    uint32_t want = 0;
    if (id == kFileParametersGuid) which = kParams, want = 8;
    if (id == kVirtualDiskSizeGuid) which = kSize, want = 8;
    if (id == kPage83DataGuid) which = kPage83, want = 16;
    if (id == kLogicalSectorSizeGuid) which = kLogical, want = 4;
    if (id == kPhysicalSectorSizeGuid) which = kPhysical, want = 4;
    if (id == kParentLocatorGuid) {
      return MakeError(Errc::kNotSupported,
                       "vhdx: differencing VHDX (parent locator) is not supported");
    }
    if (which < 0) {
      if (flags & 4) {
        return MakeError(Errc::kNotSupported, "vhdx: metadata item " + id.Text() +
                                                  " is required but unknown to vstack (at "
                                                  "offset " +
                                                  Hex(eat) + ")");
      }
      continue;
    }
    if (seen[which]) return Corrupt(eat, "metadata item " + id.Text() + " appears twice");
    if (length != want) {
      return Corrupt(eat + 20, "metadata item " + id.Text() + " is " + std::to_string(length) +
                                   " bytes, not " + std::to_string(want));
    }
    if (offset + length > b.size()) {
      return Corrupt(eat + 16, "metadata item " + id.Text() + " at " + Hex(offset) +
                                   " lies past the first " + std::to_string(b.size()) +
                                   " bytes of the region, which vstack reads");
    }
    seen[which] = true;
    const uint8_t* v = b.data() + offset;
    const uint64_t vat = at + offset;
    switch (which) {
      case kParams: {
        m.block_size = LoadLE32(v);
        const uint32_t f = LoadLE32(v + 4);
        m.leave_blocks_allocated = (f & 1) != 0;
        m.has_parent = (f & 2) != 0;
        if (!IsPowerOfTwo(m.block_size) || m.block_size < kMinBlockSize ||
            m.block_size > kMaxBlockSize) {
          return Corrupt(vat, "block size " + std::to_string(m.block_size) +
                                  " is not a power of two from 1 MiB to 256 MiB");
        }
        if (m.has_parent) {
          return MakeError(Errc::kNotSupported,
                           "vhdx: differencing VHDX (HasParent set in the file parameters at "
                           "offset " +
                               Hex(vat + 4) + ") is not supported");
        }
        break;
      }
      case kSize:
        m.virtual_size = LoadLE64(v);
        break;
      case kPage83:
        m.page83 = LoadGuid(v);
        break;
      case kLogical:
        m.logical_sector = LoadLE32(v);
        if (m.logical_sector != 512 && m.logical_sector != 4096) {
          return Corrupt(vat, "logical sector size " + std::to_string(m.logical_sector) +
                                  " is neither 512 nor 4096");
        }
        break;
      case kPhysical:
        m.physical_sector = LoadLE32(v);
        if (m.physical_sector != 512 && m.physical_sector != 4096) {
          return Corrupt(vat, "physical sector size " + std::to_string(m.physical_sector) +
                                  " is neither 512 nor 4096");
        }
        break;
    }
  }
  const char* names[kItems] = {"file parameters", "virtual disk size", "page 83 data",
                               "logical sector size", "physical sector size"};
  for (int i = 0; i < kItems; ++i) {
    if (!seen[i]) return Corrupt(at, std::string("metadata item '") + names[i] + "' is missing");
  }
  if (m.virtual_size == 0 || m.virtual_size > kMaxVirtualSize ||
      m.virtual_size % m.logical_sector != 0) {
    return Corrupt(at, "virtual disk size " + std::to_string(m.virtual_size) +
                           " is not a positive multiple of the logical sector size up to "
                           "64 TiB");
  }
  return m;
}

std::string PayloadStateName(uint8_t state) {
  switch (state) {
    case kNotPresent:
      return "not_present";
    case kUndefined:
      return "undefined";
    case kZero:
      return "zero";
    case kUnmapped:
      return "unmapped";
    case kFullyPresent:
      return "fully_present";
    case kPartiallyPresent:
      return "partially_present";
  }
  return "invalid(" + std::to_string(state) + ")";
}

BatLayout BatLayout::For(uint64_t virtual_size, uint32_t block_size, uint32_t logical_sector) {
  BatLayout l;
  l.virtual_size = virtual_size;
  l.block_size = block_size;
  l.logical_sector = logical_sector;
  l.chunk_ratio = kSectorsPerBitmapBlock * logical_sector / block_size;
  l.payload_blocks = (virtual_size + block_size - 1) / block_size;
  l.entries = l.payload_blocks == 0 ? 0 : l.payload_blocks + (l.payload_blocks - 1) / l.chunk_ratio;
  return l;
}

}  // namespace vstack::vhdx
