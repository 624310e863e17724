// DynamicState (what every queue of a dynamic VHD shares), the queue factory, and extents.
#include "formats/vhd/vhd_dynamic.h"

#include <algorithm>
#include <cstring>

#include "formats/vhd/vhd_bitmap.h"
#include "formats/vhd/vhd_dynamic_queue.h"
#include "lib/sync_io.h"

namespace vstack::vhd {

DynamicState::DynamicState(BlockDevice& lower_device, const VhdImage& image, uint64_t reserve,
                           bool recover)
    : lower(lower_device),
      block_size(image.header.block_size),
      bitmap_bytes(image.header.bitmap_bytes()),
      sectors_per_block(image.header.block_size / kSectorSize),
      bat_offset(image.header.table_offset),
      footer_bytes(image.footer_bytes),
      growable(image.growable),
      limit(image.growable ? kMaxBlockStart + image.header.bitmap_bytes() + image.header.block_size
                           : image.footer_offset),
      reserve_blocks(reserve / image.header.block_size),
      bat(image.bat),
      next_free(image.growable ? std::max(image.data_end, image.footer_offset) : image.data_end),
      footer_at(image.footer_offset) {
  if (!recover) {
    for (uint32_t i : image.unusable) bat.SetFlags(i, Bat::kUnusable);
  } else {
    for (uint32_t i : image.past_end) {
      const uint64_t data = uint64_t{image.bat[i]} * kSectorSize + bitmap_bytes;
      if (data <= image.footer_offset) {
        cut_blocks.emplace(i, static_cast<uint32_t>((image.footer_offset - data) / kSectorSize));
      } else {
        bat.Publish(i, kUnallocated, 0);
      }
    }
  }
  for (uint64_t i = 0; i < image.blocks_needed; ++i) {
    if (image.bat[i] == kUnallocated) ++unallocated;
  }
}

DynamicState::~DynamicState() = default;

void DynamicState::EvictIdleBitmaps() {
  if (bitmaps.size() <= max_cached_bitmaps) return;
  for (auto it = bitmaps.begin();
       it != bitmaps.end() && bitmaps.size() > max_cached_bitmaps * 3 / 4;) {
    const BitmapState& b = *it->second;
    const bool idle = b.loaded && !b.loading && !b.writing && b.data_pending == 0 &&
                      b.wait_load.empty() && b.wait_write.empty() && b.wait_next.empty() &&
                      b.mem == b.disk;
    it = idle ? bitmaps.erase(it) : std::next(it);
  }
}

uint64_t DynamicState::FooterOffset() {
  std::lock_guard lock(mu);
  return growable ? footer_at : limit;
}

Status DynamicState::TrimReservation() {
  uint64_t end;
  {
    std::lock_guard lock(mu);
    if (!growable || footer_at <= next_free) return OkStatus();
    end = next_free;
  }
  SyncIo io(lower);
  AlignedBuffer footer(kFooterSize, 4096);
  std::memcpy(footer.data(), footer_bytes.data(), kFooterSize);
  if (std::error_code ec = io.Write(end, footer.span())) {
    return MakeError(
        ec, "vhd: writing the footer at offset " + std::to_string(end) + ": " + ec.message());
  }
  if (std::error_code ec = io.Flush()) {
    return MakeError(ec, "vhd: flush before trimming the file failed: " + ec.message());
  }
  VSTACK_RETURN_IF_ERROR(lower.Resize(end + kFooterSize));
  std::lock_guard lock(mu);
  footer_at = end;
  return OkStatus();
}

Status DynamicState::RewriteStaleBat() {
  std::vector<uint64_t> sectors;
  {
    std::lock_guard lock(mu);
    sectors.swap(stale_bat_sectors);
  }
  SyncIo io(lower);
  AlignedBuffer bytes(kSectorSize, 4096);
  for (size_t i = 0; i < sectors.size(); ++i) {
    bat.SerializeSector(sectors[i], std::span<uint8_t, kSectorSize>(
                                        reinterpret_cast<uint8_t*>(bytes.data()), kSectorSize));
    if (std::error_code ec = io.Write(bat_offset + sectors[i] * kSectorSize, bytes.span())) {
      std::lock_guard lock(mu);  // still stale: a later close tries again
      stale_bat_sectors.insert(stale_bat_sectors.end(), sectors.begin() + i, sectors.end());
      return MakeError(ec, "vhd: rewriting BAT sector " + std::to_string(sectors[i]) +
                               " that a failed commit left: " + ec.message());
    }
  }
  return OkStatus();
}

std::unique_ptr<IoQueue> NewDynamicQueue(BlockDevice& device, DynamicState& state,
                                         std::unique_ptr<IoQueue> lower,
                                         std::unique_ptr<IoQueue> parent_queue) {
  return std::make_unique<DynamicQueue>(device, state, std::move(lower), std::move(parent_queue));
}

namespace {

// What [offset, offset + length) holds where this image has no data: zeros, or (differencing)
// whatever the parent reports.
Status AppendNotHere(BlockDevice* parent, uint64_t offset, uint64_t length,
                     std::vector<Extent>* out) {
  const uint64_t parent_size = parent != nullptr ? parent->size_bytes() : 0;
  const uint64_t in_parent = offset < parent_size ? std::min(length, parent_size - offset) : 0;
  if (in_parent > 0) {
    std::vector<Extent> below;
    VSTACK_RETURN_IF_ERROR(parent->MapExtents(offset, in_parent, &below));
    for (const Extent& e : below) AppendExtent(out, e.offset, e.length, e.flags);
  }
  if (in_parent < length) {
    AppendExtent(out, offset + in_parent, length - in_parent, kExtentHole | kExtentZero);
  }
  return OkStatus();
}

}  // namespace

Status MapDynamicExtents(DynamicState& st, uint64_t offset, uint64_t length,
                         std::vector<Extent>* out, bool own_only) {
  BlockDevice* const parent = own_only ? nullptr : st.parent;
  const uint64_t end = offset + length;
  std::unique_ptr<SyncIo> io;
  std::vector<uint8_t> bits;
  for (uint64_t pos = offset; pos < end;) {
    const uint32_t block = static_cast<uint32_t>(pos / st.block_size);
    const uint64_t block_start = uint64_t{block} * st.block_size;
    const uint64_t stop = std::min(end, block_start + st.block_size);
    const uint32_t entry = st.bat.entry(block);
    const uint8_t flags = st.bat.flags(block);
    if (entry == kUnallocated) {
      VSTACK_RETURN_IF_ERROR(AppendNotHere(parent, pos, stop - pos, out));
      pos = stop;
      continue;
    }
    if (flags & (Bat::kFull | Bat::kUnusable)) {
      AppendExtent(out, pos, stop - pos, 0);
      pos = stop;
      continue;
    }
    bool have = false;
    {
      std::lock_guard lock(st.mu);
      auto it = st.bitmaps.find(block);
      if (it != st.bitmaps.end() && it->second->loaded) {
        bits = it->second->mem;
        have = true;
      }
    }
    if (!have) {
      if (!io) io = std::make_unique<SyncIo>(st.lower);
      AlignedBuffer buf(st.bitmap_bytes, 4096);
      if (std::error_code ec = io->Read(uint64_t{entry} * kSectorSize, buf.span())) {
        return MakeError(ec, "VHD: cannot read the bitmap of block " + std::to_string(block));
      }
      const auto* p = reinterpret_cast<const uint8_t*>(buf.data());
      bits.assign(p, p + st.bitmap_bytes);
    }
    // Sector runs, clipped to [pos, stop): a range need not be sector-aligned (NBD block
    // status may ask for bytes 100..199).
    uint32_t s = static_cast<uint32_t>((pos - block_start) / kSectorSize);
    const auto last = static_cast<uint32_t>((stop - block_start + kSectorSize - 1) / kSectorSize);
    while (s < last) {
      const uint32_t n = RunLength(bits.data(), s, last);
      const uint64_t at = std::max(pos, block_start + uint64_t{s} * kSectorSize);
      const uint64_t len = std::min(stop, block_start + uint64_t{s + n} * kSectorSize) - at;
      if (TestBit(bits.data(), s)) {
        AppendExtent(out, at, len, 0);
      } else if (parent != nullptr) {
        VSTACK_RETURN_IF_ERROR(AppendNotHere(parent, at, len, out));
      } else {
        AppendExtent(out, at, len, kExtentZero);
      }
      s += n;
    }
    pos = stop;
  }
  return OkStatus();
}

}  // namespace vstack::vhd
