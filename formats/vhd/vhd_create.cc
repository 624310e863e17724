#include "formats/vhd/vhd_create.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "formats/vhd/vhd_bat.h"
#include "formats/vhd/vhd_device.h"
#include "lib/aligned_buffer.h"
#include "lib/endian.h"
#include "lib/entropy.h"
#include "lib/new_file.h"
#include "lib/registry.h"
#include "lib/spec.h"
#include "lib/sync_io.h"

namespace vstack::vhd {
namespace {

Error BadOption(const std::string& key, const std::string& why) {
  return MakeError(Errc::kInvalidArgument, "vhd: option '" + key + "': " + why);
}

std::array<uint8_t, 16> RandomUuid() {
  std::array<uint8_t, 16> u{};
  for (size_t i = 0; i < u.size(); i += 8) {
    const uint64_t v = RandomBits64();
    std::memcpy(&u[i], &v, 8);
  }
  u[6] = static_cast<uint8_t>((u[6] & 0x0F) | 0x40);  // version 4 (random)
  u[8] = static_cast<uint8_t>((u[8] & 0x3F) | 0x80);  // RFC 4122 variant
  return u;
}

// Byte offset of the bitmap of preallocated block `i`, all blocks placed in order after the
// metadata.
uint64_t PreallocatedBlockAt(uint64_t metadata_end, const CreateParams& p, uint64_t i) {
  const uint32_t bm = DynamicHeader::BitmapBytes(p.block_size);
  const uint64_t first = PlaceBlock(metadata_end, bm);
  const uint64_t stride = PlaceBlock(first + bm + p.block_size, bm) - first;
  return first + i * stride;
}

uint64_t PadToSector(uint64_t n) { return (n + kSectorSize - 1) / kSectorSize * kSectorSize; }

// A differencing disk's locator data goes between the header and the BAT, each slot in whole
// sectors (its data space counted in bytes, as Hyper-V and VirtualBox write it). Not after the
// BAT, where VirtualBox puts it: qemu places its first new block at the end of the BAT and
// would overwrite it.
DynamicHeader NewHeader(const CreateParams& p, const Footer& f) {
  DynamicHeader h;
  h.table_offset = kFooterSize + kHeaderSize;
  h.block_size = p.block_size;
  h.max_table_entries = static_cast<uint32_t>((f.current_size + p.block_size - 1) / p.block_size);
  if (p.parent) {
    h.parent_uuid = p.parent->uuid;
    h.parent_timestamp = p.parent->timestamp;
    h.parent_name = p.parent->name;
    uint64_t at = h.table_offset;
    for (size_t i = 0; i < p.parent->entries.size() && i < h.locators.size(); ++i) {
      const auto& e = p.parent->entries[i];
      // At least 1 KiB per slot, as VirtualBox reserves, so that a rebase to a longer path
      // fits in place.
      const uint64_t space = std::max<uint64_t>(PadToSector(e.data.size()), 1024);
      h.locators[i] = ParentLocator{e.code, static_cast<uint32_t>(space),
                                    static_cast<uint32_t>(e.data.size()), at};
      at += space;
    }
    h.table_offset = at;
  }
  return h;
}

// End of the header, BAT and locator data.
uint64_t MetadataEnd(const DynamicHeader& h) {
  uint64_t end = h.table_offset + h.bat_bytes();
  for (const ParentLocator& l : h.locators) {
    if (l.platform_code != 0) end = std::max(end, l.data_offset + l.data_space);
  }
  return end;
}

// Writes zeros over [offset, offset + length): with write-zeroes (an allocating fallocate on a
// file) or, for `full`, with real writes.
Status Zero(SyncIo& io, uint64_t offset, uint64_t length, Preallocate how) {
  if (how == Preallocate::kFalloc) {
    if (std::error_code ec = io.WriteZeroes(offset, length)) {
      return MakeError(ec, "vhd: cannot preallocate " + std::to_string(length) +
                               " bytes at offset " + std::to_string(offset) + ": " + ec.message());
    }
    return OkStatus();
  }
  AlignedBuffer zeros(static_cast<size_t>(std::min<uint64_t>(length, 1 << 20)), 4096);
  for (uint64_t done = 0; done < length;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), length - done));
    if (std::error_code ec = io.Write(offset + done, zeros.span().first(n))) {
      return MakeError(ec, "vhd: cannot write zeros at offset " + std::to_string(offset + done) +
                               ": " + ec.message());
    }
    done += n;
  }
  return OkStatus();
}

Status WriteBytes(SyncIo& io, uint64_t offset, const void* data, size_t len) {
  AlignedBuffer buf(len, 4096);
  std::memcpy(buf.data(), data, len);
  if (std::error_code ec = io.Write(offset, buf.span())) {
    return MakeError(ec, "vhd: cannot write " + std::to_string(len) + " bytes at offset " +
                             std::to_string(offset) + ": " + ec.message());
  }
  return OkStatus();
}

}  // namespace

std::vector<OptionInfo> CreateOptionInfos() {
  return {
      {"subformat", "dynamic or fixed", "dynamic"},
      {"block_size", "dynamic block size: a power of two from 512K to 64M", "2M"},
      {"force_size",
       "on: keep the exact size and write the maximum CHS geometry; off: round the size up "
       "to a CHS-representable one, as qemu-img does",
       "off"},
      {"creator", "creator application, 1-4 characters", "vstk"},
      {"creator_version", "creator version MAJOR.MINOR", "0.1"},
      {"creator_os", "creator host OS code, 4 characters", "Wi2k"},
      {"preallocate", "off, metadata (dynamic: allocate every block), falloc or full", "off"},
      {"backing_file",
       "a differencing disk over this VHD (a path relative to the new image's directory)", ""},
      {"backing_fmt", "the backing file's format: vhd", "vhd"},
  };
}

Result<CreateParams> ParseCreateParams(uint64_t size, const OptionValues& o) {
  CreateParams p;
  p.requested_size = size;
  if (size == 0 && o.Get("backing_file").empty()) {
    return BadOption("size", "the size must be positive");
  }
  VSTACK_ASSIGN_OR_RETURN(std::string sub, o.Choice("subformat", {"dynamic", "fixed"}));
  p.dynamic = sub == "dynamic";
  VSTACK_ASSIGN_OR_RETURN(uint64_t bs, o.Size("block_size"));
  if (!p.dynamic && o.Has("block_size")) {
    return BadOption("block_size", "applies to dynamic images only");
  }
  if (bs < kMinCreateBlockSize || bs > kMaxCreateBlockSize || (bs & (bs - 1)) != 0) {
    return BadOption("block_size",
                     std::to_string(bs) + " is not a power of two from 512 KiB to 64 MiB");
  }
  p.block_size = static_cast<uint32_t>(bs);
  VSTACK_ASSIGN_OR_RETURN(p.force_size, o.Bool("force_size"));
  const std::string creator = o.Get("creator");
  if (creator.empty() || creator.size() > 4) {
    return BadOption("creator", "'" + creator + "' must be 1 to 4 characters");
  }
  p.creator = {' ', ' ', ' ', ' '};
  std::memcpy(p.creator.data(), creator.data(), creator.size());
  const std::string version = o.Get("creator_version");
  unsigned major = 0, minor = 0;
  char tail = 0;
  if (std::sscanf(version.c_str(), "%u.%u%c", &major, &minor, &tail) != 2 || major > 0xFFFF ||
      minor > 0xFFFF) {
    return BadOption("creator_version", "'" + version + "' is not MAJOR.MINOR (each 0..65535)");
  }
  p.creator_version = major << 16 | minor;
  const std::string os = o.Get("creator_os");
  if (os.size() != 4) return BadOption("creator_os", "'" + os + "' must be 4 characters");
  p.creator_os = LoadBE32(os.data());
  VSTACK_ASSIGN_OR_RETURN(std::string pre,
                          o.Choice("preallocate", {"off", "metadata", "falloc", "full"}));
  p.preallocate = pre == "off"        ? Preallocate::kOff
                  : pre == "metadata" ? Preallocate::kMetadata
                  : pre == "falloc"   ? Preallocate::kFalloc
                                      : Preallocate::kFull;
  p.backing_file = o.Get("backing_file");
  if (!p.backing_file.empty()) {
    const std::string fmt = o.Get("backing_fmt");
    if (fmt != "vhd" && fmt != "vpc") {
      return BadOption("backing_fmt", "'" + fmt + "': a VHD's parent must be a VHD (vhd)");
    }
    if (!p.dynamic) return BadOption("subformat", "a differencing disk is sparse: not fixed");
    if (p.preallocate != Preallocate::kOff) {
      return BadOption("preallocate", "would hide the parent's data in a differencing disk");
    }
    return p;  // the size may be 0 (the parent's); checked by LinkToParent
  }
  const Footer f = NewFooter(p);
  if (p.dynamic && f.current_size > kMaxDynamicSize) {
    return BadOption("size", std::to_string(f.current_size) +
                                 " bytes exceeds the 2040 GiB limit of dynamic VHD images "
                                 "(fixed images may be larger)");
  }
  return p;
}

Footer NewFooter(const CreateParams& p) {
  Footer f;
  f.data_offset = p.dynamic ? kFooterSize : kNoDataOffset;
  const uint64_t now = NowUnixSeconds();
  f.timestamp = static_cast<uint32_t>(now > kVhdEpoch ? now - kVhdEpoch : 0);
  f.creator_app = p.creator;
  f.creator_version = p.creator_version;
  f.creator_os = p.creator_os;
  if (p.force_size) {
    f.current_size = (p.requested_size + kSectorSize - 1) / kSectorSize * kSectorSize;
    f.geometry = kMaxChs;
  } else {
    f.current_size = RoundUpToChs(p.requested_size, &f.geometry);
  }
  f.original_size = f.current_size;
  f.disk_type = static_cast<uint32_t>(p.parent    ? DiskType::kDifferencing
                                      : p.dynamic ? DiskType::kDynamic
                                                  : DiskType::kFixed);
  f.uuid = RandomUuid();
  return f;
}

uint64_t NewImageFileSize(const CreateParams& p) {
  const Footer f = NewFooter(p);
  if (!p.dynamic) return f.current_size + kFooterSize;
  const DynamicHeader h = NewHeader(p, f);
  const uint64_t metadata_end = MetadataEnd(h);
  if (p.preallocate == Preallocate::kOff) return metadata_end + kFooterSize;
  return PreallocatedBlockAt(metadata_end, p, h.max_table_entries - 1) + h.bitmap_bytes() +
         p.block_size + kFooterSize;
}

Status WriteNewImage(BlockDevice& device, const CreateParams& p) {
  const Footer f = NewFooter(p);
  std::array<uint8_t, kFooterSize> footer{};
  SerializeFooter(f, footer);
  const uint64_t size = device.size_bytes();
  if (size < NewImageFileSize(p)) {
    return MakeError(Errc::kNoSpace, "vhd: the device (" + std::to_string(size) +
                                         " bytes) is too small for the image (" +
                                         std::to_string(NewImageFileSize(p)) + " bytes)");
  }
  const uint64_t footer_at = size - kFooterSize;
  SyncIo io(device);
  if (!p.dynamic) {
    if (p.preallocate == Preallocate::kFalloc || p.preallocate == Preallocate::kFull) {
      VSTACK_RETURN_IF_ERROR(Zero(io, 0, f.current_size, p.preallocate));
    }
  } else {
    const DynamicHeader h = NewHeader(p, f);
    std::array<uint8_t, kHeaderSize> header{};
    SerializeHeader(h, header);
    VSTACK_RETURN_IF_ERROR(WriteBytes(io, 0, footer.data(), kFooterSize));
    VSTACK_RETURN_IF_ERROR(WriteBytes(io, f.data_offset, header.data(), kHeaderSize));
    if (p.parent) {
      for (size_t i = 0; i < p.parent->entries.size() && i < h.locators.size(); ++i) {
        std::vector<uint8_t> data = p.parent->entries[i].data;
        data.resize(h.locators[i].data_space, 0);
        VSTACK_RETURN_IF_ERROR(WriteBytes(io, h.locators[i].data_offset, data.data(), data.size()));
      }
    }
    const uint64_t metadata_end = MetadataEnd(h);
    std::vector<uint32_t> entries(h.max_table_entries, kUnallocated);
    if (p.preallocate != Preallocate::kOff) {
      const std::vector<uint8_t> ones(h.bitmap_bytes(), 0xFF);
      for (uint32_t i = 0; i < h.max_table_entries; ++i) {
        const uint64_t at = PreallocatedBlockAt(metadata_end, p, i);
        entries[i] = static_cast<uint32_t>(at / kSectorSize);
        VSTACK_RETURN_IF_ERROR(WriteBytes(io, at, ones.data(), ones.size()));
        if (p.preallocate != Preallocate::kMetadata) {
          VSTACK_RETURN_IF_ERROR(Zero(io, at + ones.size(), p.block_size, p.preallocate));
        }
      }
    }
    const Bat bat(entries);
    constexpr uint64_t kSectorsPerChunk = 2048;  // 1 MiB of BAT per write
    std::vector<uint8_t> chunk;
    const uint64_t bat_sectors = h.bat_bytes() / kSectorSize;
    for (uint64_t s = 0; s < bat_sectors; s += kSectorsPerChunk) {
      const uint64_t n = std::min(kSectorsPerChunk, bat_sectors - s);
      chunk.resize(n * kSectorSize);
      for (uint64_t k = 0; k < n; ++k) {
        bat.SerializeSector(s + k,
                            std::span<uint8_t, kSectorSize>(&chunk[k * kSectorSize], kSectorSize));
      }
      VSTACK_RETURN_IF_ERROR(
          WriteBytes(io, h.table_offset + s * kSectorSize, chunk.data(), chunk.size()));
    }
  }
  VSTACK_RETURN_IF_ERROR(WriteBytes(io, footer_at, footer.data(), kFooterSize));
  if (std::error_code ec = io.Flush()) {
    return MakeError(ec, "vhd: flush after create failed: " + ec.message());
  }
  return OkStatus();
}

Status LinkToParent(const std::string& path, CreateParams* p) {
  namespace fs = std::filesystem;
  fs::path parent_path(p->backing_file);
  if (parent_path.is_relative()) {
    const fs::path dir = fs::path(path).parent_path();
    parent_path = (dir.empty() ? fs::path(".") : dir) / parent_path;
  }
  OpenOptions ro;
  ro.read_only = true;
  Result<DevicePtr> dev = Open("vhd+" + FormatSpecPart(SpecPart{"file", parent_path, {}}), ro);
  if (!dev) {
    // An image of another format (a VHDX) is named as such, not by the VHD footer it lacks.
    if (Result<DevicePtr> file = Open(FormatSpecPart(SpecPart{"file", parent_path, {}}), ro)) {
      for (const ComponentInfo* c : Registry::Global().All()) {
        if (c->name != "vhd" && c->probe && c->probe(**file)) {
          return MakeError(dev.error().code, "vhd: backing file '" + p->backing_file + "' is a " +
                                                 c->name + " image: a VHD's parent must be a VHD");
        }
      }
    }
    return MakeError(dev.error().code, "vhd: backing file '" + p->backing_file +
                                           "': " + dev.error().message);
  }
  const Footer& parent = static_cast<const VhdDevice&>(**dev).image().footer;
  if (p->requested_size == 0) p->requested_size = (*dev)->geometry().size_bytes;
  p->parent = MakeParentLink(parent_path.string(), path, parent);
  const Footer f = NewFooter(*p);
  if (f.current_size > kMaxDynamicSize) {
    return BadOption("size", std::to_string(f.current_size) +
                                 " bytes exceeds the 2040 GiB limit of differencing VHD images");
  }
  return (*dev)->Close();
}

Result<DevicePtr> CreateImageFile(const std::string& path, const CreateParams& params) {
  CreateParams p = params;
  if (!p.backing_file.empty()) VSTACK_RETURN_IF_ERROR(LinkToParent(path, &p));
  return CreateNewFile(path, NewImageFileSize(p),
                       [&](BlockDevice& file) { return WriteNewImage(file, p); });
}

}  // namespace vstack::vhd
