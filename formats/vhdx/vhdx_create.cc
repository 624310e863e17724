#include "formats/vhdx/vhdx_create.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "formats/vhdx/vhdx_format.h"
#include "formats/vhdx/vhdx_io.h"
#include "lib/endian.h"
#include "lib/iovec.h"
#include "lib/new_file.h"
#include "lib/spec.h"
#include "lib/sync_io.h"

namespace vstack::vhdx {
namespace {

Error BadOption(const std::string& key, const std::string& why) {
  return MakeError(Errc::kInvalidArgument, "vhdx: option '" + key + "': " + why);
}

struct Layout {
  uint32_t block_size;
  BatLayout bat;
  uint64_t log_offset = kMiB;
  uint64_t metadata_offset;
  uint64_t bat_offset;
  uint64_t bat_length;
  uint64_t data_offset;
};

Layout LayoutFor(const CreateParams& p) {
  Layout l;
  l.block_size = p.block_size ? p.block_size : DefaultBlockSize(p.size);
  l.bat = BatLayout::For(p.size, l.block_size, p.logical_sector);
  l.metadata_offset = l.log_offset + p.log_size;
  l.bat_offset = l.metadata_offset + kMiB;
  l.bat_length = AlignUp(std::max<uint64_t>(l.bat.entries * 8, 1), kMiB);
  l.data_offset = l.bat_offset + l.bat_length;
  return l;
}

}  // namespace

uint32_t DefaultBlockSize(uint64_t size) {
  if (size > (32ull << 40)) return 64 << 20;
  if (size > (100ull << 30)) return 32 << 20;
  if (size > (1ull << 30)) return 16 << 20;
  return 8 << 20;
}

std::vector<OptionInfo> CreateOptionInfos() {
  return {
      {"subformat", "dynamic or fixed", "dynamic"},
      {"block_size", "0 (chosen from the size, as qemu-img does) or a power of two 1M..256M", "0"},
      {"log_size", "log size, a multiple of 1M", "1M"},
      {"block_state_zero",
       "on: blocks start in state ZERO instead of NOT_PRESENT (dynamic) or FULLY_PRESENT "
       "(fixed)",
       "off"},
      {"logical_sector_size", "512 or 4096", "512"},
      {"physical_sector_size", "512 or 4096", "4096"},
  };
}

Result<CreateParams> ParseCreateParams(uint64_t size, const OptionValues& o) {
  CreateParams p;
  VSTACK_ASSIGN_OR_RETURN(std::string sub, o.Choice("subformat", {"dynamic", "fixed"}));
  p.fixed = sub == "fixed";
  VSTACK_ASSIGN_OR_RETURN(uint64_t bs, o.Size("block_size"));
  if (bs != 0 && (bs < kMinBlockSize || bs > kMaxBlockSize || (bs & (bs - 1)) != 0)) {
    return BadOption("block_size",
                     std::to_string(bs) + " is not 0 or a power of two from 1 MiB to 256 MiB");
  }
  p.block_size = static_cast<uint32_t>(bs);
  VSTACK_ASSIGN_OR_RETURN(uint64_t log, o.Size("log_size"));
  if (log == 0 || log % kMiB != 0 || log > (1ull << 30)) {
    return BadOption("log_size", std::to_string(log) + " is not a multiple of 1 MiB up to 1 GiB");
  }
  p.log_size = static_cast<uint32_t>(log);
  VSTACK_ASSIGN_OR_RETURN(p.block_state_zero, o.Bool("block_state_zero"));
  VSTACK_ASSIGN_OR_RETURN(std::string ls, o.Choice("logical_sector_size", {"512", "4096"}));
  VSTACK_ASSIGN_OR_RETURN(std::string ps, o.Choice("physical_sector_size", {"512", "4096"}));
  p.logical_sector = static_cast<uint32_t>(std::stoul(ls));
  p.physical_sector = static_cast<uint32_t>(std::stoul(ps));
  p.size = AlignUp(size, p.logical_sector);
  if (p.size == 0 || p.size > kMaxVirtualSize) {
    return BadOption("size", std::to_string(size) + " is not from 1 byte to 64 TiB");
  }
  return p;
}

uint64_t NewImageFileSize(const CreateParams& p) {
  const Layout l = LayoutFor(p);
  return l.data_offset + (p.fixed ? l.bat.payload_blocks * l.block_size : 0);
}

Status WriteNewImage(BlockDevice& device, const CreateParams& p) {
  const Layout l = LayoutFor(p);
  if (device.size_bytes() < NewImageFileSize(p)) {
    return MakeError(Errc::kNoSpace, "vhdx: the device (" + std::to_string(device.size_bytes()) +
                                         " bytes) is too small for the image (" +
                                         std::to_string(NewImageFileSize(p)) + " bytes)");
  }
  SyncIo io(device);
  IoQueue* q = io.queue();
  if (q == nullptr) return io.open_error();
  // File identifier with the creator in UTF-16LE.
  std::vector<uint8_t> first(64 * kKiB, 0);
  std::memcpy(first.data(), "vhdxfile", 8);
  const char creator[] = "vstack";
  for (size_t i = 0; i + 1 < sizeof creator; ++i)
    first[8 + 2 * i] = static_cast<uint8_t>(creator[i]);
  VSTACK_RETURN_IF_ERROR(WriteAt(*q, 0, first));
  Header h;
  h.file_write = Guid::Random();
  h.data_write = Guid::Random();
  h.log_length = p.log_size;
  h.log_offset = l.log_offset;
  for (int i = 0; i < 2; ++i) {
    h.sequence = static_cast<uint64_t>(i);
    VSTACK_RETURN_IF_ERROR(WriteAt(*q, kHeaderOffset[i], EncodeHeader(h)));
  }
  const std::vector<Region> regions = {
      {kBatRegionGuid, l.bat_offset, static_cast<uint32_t>(l.bat_length), true},
      {kMetadataRegionGuid, l.metadata_offset, static_cast<uint32_t>(kMiB), true}};
  const std::vector<uint8_t> table = EncodeRegionTable(regions);
  for (int i = 0; i < 2; ++i) VSTACK_RETURN_IF_ERROR(WriteAt(*q, kRegionTableOffset[i], table));
  Metadata m;
  m.block_size = l.block_size;
  m.leave_blocks_allocated = p.fixed;
  m.virtual_size = p.size;
  m.page83 = Guid::Random();
  m.logical_sector = p.logical_sector;
  m.physical_sector = p.physical_sector;
  VSTACK_RETURN_IF_ERROR(WriteAt(*q, l.metadata_offset, EncodeMetadata(m)));
  // The BAT, 1 MiB at a time.
  std::vector<uint8_t> chunk;
  for (uint64_t first_entry = 0; first_entry < l.bat_length / 8;) {
    const uint64_t n = std::min<uint64_t>(kMiB / 8, l.bat_length / 8 - first_entry);
    chunk.assign(n * 8, 0);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t index = first_entry + i;
      if (index >= l.bat.entries || l.bat.IsBitmapIndex(index)) continue;
      const uint64_t block = index - index / (l.bat.chunk_ratio + 1);
      uint64_t e = MakeEntry(p.block_state_zero ? kZero : kNotPresent, 0);
      if (p.fixed) {
        e = MakeEntry(p.block_state_zero ? kZero : kFullyPresent,
                      l.data_offset + block * l.block_size);
      }
      StoreLE64(chunk.data() + 8 * i, e);
    }
    // Zeros over space that reads as zeros (a new file's hole) are not written, so that the BAT
    // of a new dynamic image stays a hole that opens without being read; but for the last
    // chunk, which ends the file: its length rests on a write, not on the truncation alone.
    const uint64_t at = l.bat_offset + first_entry * 8;
    first_entry += n;
    const bool last = first_entry == l.bat_length / 8;
    if (!last && IsZero(chunk.data(), chunk.size()) && MappedAsZeros(device, at, chunk.size())) {
      continue;
    }
    VSTACK_RETURN_IF_ERROR(WriteAt(*q, at, chunk));
  }
  return FlushQueue(*q);
}

Result<DevicePtr> CreateImageFile(const std::string& path, const CreateParams& p) {
  return CreateNewFile(path, NewImageFileSize(p),
                       [&](BlockDevice& file) { return WriteNewImage(file, p); });
}

}  // namespace vstack::vhdx
