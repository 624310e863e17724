#include "formats/vhdx/vhdx_image.h"

#include <algorithm>
#include <cstring>

#include "formats/vhdx/vhdx_io.h"
#include "formats/vhdx/vhdx_log.h"
#include "lib/endian.h"
#include "lib/plural.h"
#include "lib/sync_io.h"

namespace vstack::vhdx {
namespace {

constexpr uint64_t kPrologueSize = 320 * kKiB;  // identifier, headers, region tables
constexpr size_t kBatChunk = 1 << 20;

std::string CreatorText(const uint8_t* p) {
  std::string s;
  for (size_t i = 0; i + 1 < 512; i += 2) {
    const uint16_t c = static_cast<uint16_t>(p[i] | (p[i + 1] << 8));
    if (c == 0) break;
    s += (c >= 0x20 && c < 0x7F) ? static_cast<char>(c) : '?';
  }
  return s;
}

// Writes the file's last sector (at most 4 KiB) back as it reads, so that a write reaches the
// file's end: the next flush makes its length durable (growing alone does not, docs/design.md).
// Over a full disk the write may need space it cannot get: an error.
Status RewriteTail(BlockDevice& device, IoQueue& q) {
  const uint64_t sector = device.geometry().logical_block;
  const uint64_t to = device.size_bytes() / sector * sector;
  const uint64_t from = (to >= kLogSector ? to - kLogSector : 0) / sector * sector;
  if (from >= to) return OkStatus();
  std::vector<uint8_t> tail(to - from);
  VSTACK_RETURN_IF_ERROR(ReadAt(q, from, tail));
  return WriteAt(q, from, tail);
}

// Writes the log's writes in place, in order.
Status ApplyWrites(IoQueue& q, std::span<const LogWrite> writes) {
  for (const LogWrite& w : writes) {
    VSTACK_RETURN_IF_ERROR(w.zero ? ZeroAt(q, w.file_offset, w.length)
                                  : WriteAt(q, w.file_offset, w.data));
  }
  return OkStatus();
}

// A replay that ran out of space keeps the log (it is replayed again before the first write,
// or at the next open); any other error fails the open.
Status KeptForLackOfSpace(Status failed, VhdxImage* image) {
  if (failed.error().code != std::errc::no_space_on_device) return failed;
  image->log_kept = true;
  return OkStatus();
}

// Reads a structure (the metadata region, the BAT) as the log, if it could not be replayed,
// says it is.
Status ReadStructure(IoQueue& q, const VhdxImage& image, uint64_t offset, std::span<uint8_t> out) {
  VSTACK_RETURN_IF_ERROR(ReadAt(q, offset, out));
  for (const LogWrite& w : image.unreplayed) {
    const uint64_t from = std::max(offset, w.file_offset);
    const uint64_t to = std::min(offset + out.size(), w.file_offset + w.length);
    if (from >= to) continue;
    uint8_t* dst = out.data() + (from - offset);
    if (w.zero) {
      std::memset(dst, 0, to - from);
    } else {
      std::memcpy(dst, w.data.data() + (from - w.file_offset), to - from);
    }
  }
  return OkStatus();
}

// Replays the active sequence of the log (docs/layers/vhdx.md, "Log"), or refuses to when the
// image is read-only.
Status ReplayLog(BlockDevice& device, IoQueue& q, VhdxImage* image, bool writable) {
  const Header& h = image->header;
  if (h.log_guid.IsZero()) return OkStatus();
  if (h.log_length > kMaxLogLength) {
    return MakeError(Errc::kNotSupported, "vhdx: a log of " + std::to_string(h.log_length) +
                                              " bytes is larger than vstack replays (256 MiB)");
  }
  std::vector<uint8_t> log(h.log_length);
  VSTACK_RETURN_IF_ERROR(ReadAt(q, h.log_offset, log));
  const ActiveSequence seq = FindActiveSequence(log, h.log_guid);
  if (!seq.found) return OkStatus();  // a log GUID but no entries: nothing to replay
  if (!writable) {
    return MakeError(Errc::kReadOnly,
                     "vhdx: the image's log holds " +
                         Counted(seq.offsets.size(), "entry", "entries") +
                         " that must be replayed, but it is opened read-only; open it "
                         "writable once (e.g. vstack check -r all) to replay the log");
  }
  const uint64_t limit = kMaxVirtualSize + (16ull << 30);
  if (seq.head.last_file_offset > limit) {
    return MakeError(Errc::kCorruption, "vhdx: log entry's last file offset " +
                                            std::to_string(seq.head.last_file_offset) +
                                            " is beyond any VHDX file");
  }
  if (seq.head.flushed_file_offset > image->file_size) {
    return MakeError(Errc::kCorruption,
                     "vhdx: the log says the file was at least " +
                         std::to_string(seq.head.flushed_file_offset) + " bytes, but it is " +
                         std::to_string(image->file_size) + ": it was truncated");
  }
  const uint64_t end = std::max(image->file_size, seq.head.last_file_offset);
  if (end > device.size_bytes()) {
    VSTACK_RETURN_IF_ERROR(device.Resize(end));
    image->file_size = end;
  }
  std::vector<LogWrite> writes;
  for (uint32_t offset : seq.offsets) {
    for (LogWrite& w : EntryWrites(log, offset)) {
      const bool hits_log =
          w.file_offset < h.log_offset + h.log_length && h.log_offset < w.file_offset + w.length;
      if (w.file_offset < kPrologueSize || hits_log || w.length > end ||
          w.file_offset > end - w.length) {
        return MakeError(Errc::kCorruption, "vhdx: log entry at log offset " +
                                                std::to_string(offset) + " writes " +
                                                std::to_string(w.length) + " bytes at " +
                                                std::to_string(w.file_offset) +
                                                ", into the headers, the log or past the file");
      }
      writes.push_back(std::move(w));
    }
    ++image->replayed_entries;
  }
  // Out of space below (a thin layer such as dedup needs new space even to overwrite), the
  // log stays as it is, and the structures are loaded through its writes (ReadStructure):
  // the open needs no new space, and SettleLog replays again before the first write.
  image->unreplayed = std::move(writes);
  Status replayed = ApplyWrites(q, image->unreplayed);
  if (!replayed) return KeptForLackOfSpace(std::move(replayed), image);
  image->unreplayed.clear();
  // The BAT entries just replayed may point at blocks up to LastFileOffset, and the log is
  // about to be marked empty: the file's length must be durable with them (the file may have
  // been grown above, or by an earlier replay whose length never became durable). If the
  // length cannot be made durable (no space), the log stays as it is too.
  Status durable = RewriteTail(device, q);
  if (durable) durable = FlushQueue(q);
  if (!durable) return KeptForLackOfSpace(std::move(durable), image);
  Header clean = h;
  clean.log_guid = Guid{};
  // Everything the log holds is durable now: a header that cannot be rewritten for lack of
  // space leaves a log that replays again to the same result.
  Status marked = WriteHeaders(q, image, clean);
  if (!marked && marked.error().code == std::errc::no_space_on_device) return OkStatus();
  return marked;
}

// Blocks must not share file space. Present blocks (and sector bitmaps) that overlap are
// corruption: a write to one lands in the other (a strict open refuses them; a lenient one,
// for check, leaves them to VhdxDevice::Check to name). The space a ZERO or UNMAPPED block
// keeps (a non-zero offset, which the writer reuses for the block's next write) is forgotten
// unless it is the block's alone: it must not touch a structure, a present block or another
// block's kept space, nor lie past the end of the file. The block still reads as zeros; its
// next write takes new space.
template <typename HitsStructure>
Status CheckSharedSpace(VhdxImage* image, bool lenient, const HitsStructure& hits_structure) {
  const BatLayout& l = image->layout;
  struct Space {
    uint64_t offset, end, index;
    bool operator<(const Space& o) const { return offset < o.offset; }
  };
  std::vector<Space> present, kept;
  image->bat.ForEachNonZero([&](uint64_t index, uint64_t e) {
    const uint8_t state = EntryState(e);
    const uint64_t offset = EntryOffset(e);
    if (e == kUnusableState || offset == 0) return;
    const uint64_t size = l.IsBitmapIndex(index) ? kMiB : l.block_size;
    if (state == kFullyPresent || (state == kBitmapPresent && l.IsBitmapIndex(index))) {
      present.push_back({offset, offset + size, index});
    } else if (!l.IsBitmapIndex(index) && (state == kZero || state == kUnmapped)) {
      kept.push_back({offset, offset + size, index});
    }
  });
  std::sort(present.begin(), present.end());
  // reach[i]: the space present[0..i] reaches furthest into, and whose it is (blocks and
  // bitmaps differ in size, so the one before need not be the one that reaches furthest).
  std::vector<size_t> reach(present.size());
  for (size_t i = 0; i < present.size(); ++i) {
    reach[i] = i == 0 || present[i].end > present[reach[i - 1]].end ? i : reach[i - 1];
    if (i > 0 && !lenient && present[i].offset < present[reach[i - 1]].end) {
      return MakeError(Errc::kCorruption,
                       "vhdx: BAT entries " + std::to_string(present[reach[i - 1]].index) +
                           " and " + std::to_string(present[i].index) +
                           " overlap at file offset " + std::to_string(present[i].offset));
    }
  }
  std::sort(kept.begin(), kept.end());
  auto overlaps_present = [&](const Space& k) {
    auto it = std::upper_bound(present.begin(), present.end(), Space{k.offset, 0, 0});
    if (it != present.end() && it->offset < k.end) return true;  // one starting inside
    const size_t before = static_cast<size_t>(it - present.begin());
    return before > 0 && present[reach[before - 1]].end > k.offset;  // one reaching into it
  };
  std::vector<bool> forget(kept.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    const Space& k = kept[i];
    if (hits_structure(k.offset, k.end - k.offset) || k.end > image->file_size ||
        overlaps_present(k)) {
      forget[i] = true;
    }
    if (i > 0 && k.offset < kept[i - 1].end) forget[i] = forget[i - 1] = true;
  }
  for (size_t i = 0; i < kept.size(); ++i) {
    const uint64_t index = kept[i].index;
    if (forget[i]) image->bat.Set(index, MakeEntry(EntryState(image->bat.Get(index)), 0));
  }
  return OkStatus();
}

// True if the structure bytes [offset, offset+length) read as zeros without reading them: the
// device below maps them so (a BAT region the file leaves a hole) and no log write left
// unreplayed touches them.
bool StructureMappedAsZeros(BlockDevice& device, const VhdxImage& image, uint64_t offset,
                            uint64_t length) {
  for (const LogWrite& w : image.unreplayed) {
    if (w.file_offset < offset + length && offset < w.file_offset + w.length) return false;
  }
  return MappedAsZeros(device, offset, length);
}

// Loads the BAT into image->bat, keeping only the pages with a non-zero entry, and checks
// every entry (lenient: marks the bad ones kUnusableState and records why).
Status LoadBat(BlockDevice& device, IoQueue& q, VhdxImage* image, bool lenient) {
  const BatLayout& l = image->layout;
  const Region& r = image->bat_region;
  if (l.entries > r.length / 8) {
    return MakeError(Errc::kCorruption,
                     "vhdx: the BAT region (" + std::to_string(r.length) + " bytes at " +
                         std::to_string(r.offset) + ") is too small for the " +
                         Counted(l.entries, "entry", "entries") + " the virtual size needs");
  }
  image->bat = BatTable(l.entries);
  const uint64_t bat_bytes = AlignUp(l.entries * 8, kLogSector);
  std::vector<uint8_t> chunk;
  for (uint64_t done = 0; done < bat_bytes;) {
    const uint64_t n = std::min<uint64_t>(kBatChunk, bat_bytes - done);
    if (!StructureMappedAsZeros(device, *image, r.offset + done, n)) {
      chunk.resize(n);
      VSTACK_RETURN_IF_ERROR(ReadStructure(q, *image, r.offset + done, chunk));
      for (uint64_t i = 0; i < n / 8 && done / 8 + i < l.entries; ++i) {
        const uint64_t e = LoadLE64(chunk.data() + 8 * i);
        if (e != 0) image->bat.Set(done / 8 + i, e, std::memory_order_relaxed);
      }
    }
    done += n;
  }
  // Payload blocks must not overlap the first MiB, the log, the BAT or the metadata region.
  const Region log{Guid{}, image->header.log_offset, image->header.log_length, false};
  auto hits_structure = [&](uint64_t offset, uint64_t length) {
    if (offset < kMiB) return true;
    const Region* structures[] = {&log, &image->bat_region, &image->metadata_region};
    for (const Region* s : structures) {
      if (offset < s->offset + s->length && s->offset < offset + length) return true;
    }
    return false;
  };
  // Entries that are 0 (not present, no offset) are valid everywhere: only the others are seen.
  Status failed;
  image->bat.ForEachNonZero([&](uint64_t index, uint64_t e) {
    if (!failed) return;
    const uint8_t state = EntryState(e);
    const uint64_t offset = EntryOffset(e);
    std::string problem;
    if (l.IsBitmapIndex(index)) {
      if (state != kNotPresent && state != kBitmapPresent) {
        problem = "sector bitmap entry " + std::to_string(index) + " has invalid state " +
                  std::to_string(state);
      }
    } else {
      const uint64_t block = index - index / (l.chunk_ratio + 1);
      const uint64_t needed =
          std::min<uint64_t>(l.block_size, l.virtual_size - block * l.block_size);
      switch (state) {
        case kNotPresent:
        case kUndefined:
        case kZero:
        case kUnmapped:
          break;
        case kFullyPresent:
          if (hits_structure(offset, l.block_size) || offset > image->file_size ||
              needed > image->file_size - offset) {
            problem = "BAT entry " + std::to_string(index) + " (block " + std::to_string(block) +
                      ") points at " + std::to_string(offset) +
                      ", into the metadata or past the end of the file (" +
                      std::to_string(image->file_size) + " bytes)";
          }
          break;
        default:
          problem = "BAT entry " + std::to_string(index) + " (block " + std::to_string(block) +
                    ") has state " + PayloadStateName(state) +
                    ", invalid in a VHDX without a parent";
      }
    }
    if (problem.empty()) return;
    if (!lenient) {
      failed = MakeError(Errc::kCorruption, "vhdx: " + problem + " (at offset " +
                                                std::to_string(r.offset + 8 * index) + ")");
      return;
    }
    image->problems.push_back(problem);
    image->unusable.push_back({index, e});
    image->bat.Set(index, kUnusableState);
  });
  VSTACK_RETURN_IF_ERROR(failed);
  return CheckSharedSpace(image, lenient, hits_structure);
}

}  // namespace

uint64_t OnDiskEntry(const VhdxImage& image, uint64_t index, uint64_t value) {
  if (value != kUnusableState) return value;
  auto it = std::lower_bound(image.unusable.begin(), image.unusable.end(),
                             std::pair<uint64_t, uint64_t>{index, 0});
  return it != image.unusable.end() && it->first == index ? it->second : 0;
}

uint64_t PastUnusable(const VhdxImage& image, uint64_t offset, uint64_t length) {
  for (bool moved = true; moved;) {
    moved = false;
    for (const auto& [index, e] : image.unusable) {
      const uint64_t at = EntryOffset(e);
      const uint64_t size = image.layout.IsBitmapIndex(index) ? kMiB : image.layout.block_size;
      if (at == 0 || at > UINT64_MAX - 2 * size) continue;  // none, or never reachable
      if (at < offset + length && offset < at + size) {
        offset = (at + size + kMiB - 1) / kMiB * kMiB;
        moved = true;
      }
    }
  }
  return offset;
}

Status SettleLog(BlockDevice& device, IoQueue& q, VhdxImage* image) {
  if (!image->log_kept) return OkStatus();
  VSTACK_RETURN_IF_ERROR(ApplyWrites(q, image->unreplayed));
  VSTACK_RETURN_IF_ERROR(RewriteTail(device, q));
  VSTACK_RETURN_IF_ERROR(FlushQueue(q));
  image->unreplayed.clear();
  image->log_kept = false;
  return OkStatus();
}

Status WriteHeaders(IoQueue& q, VhdxImage* image, const Header& h) {
  Header next = h;
  for (int i = 0; i < 2; ++i) {
    next.sequence = image->header.sequence + 1;
    const int slot = 1 - image->header_slot;
    const auto bytes = EncodeHeader(next);
    VSTACK_RETURN_IF_ERROR(WriteAt(q, kHeaderOffset[slot], bytes));
    VSTACK_RETURN_IF_ERROR(FlushQueue(q));
    image->header = next;
    image->header_slot = slot;
  }
  return OkStatus();
}

Result<VhdxImage> LoadImage(BlockDevice& device, IoQueue& q, bool writable, bool lenient) {
  VhdxImage image;
  image.file_size = device.size_bytes();
  if (image.file_size < kPrologueSize + kMiB) {
    return MakeError(Errc::kCorruption, "vhdx: the file (" + std::to_string(image.file_size) +
                                            " bytes) is too small to hold a VHDX");
  }
  std::vector<uint8_t> pro(kPrologueSize);
  VSTACK_RETURN_IF_ERROR(ReadAt(q, 0, pro));
  if (std::memcmp(pro.data(), "vhdxfile", 8) != 0) {
    return MakeError(Errc::kCorruption,
                     "vhdx: not a VHDX file (no 'vhdxfile' identifier at offset 0)");
  }
  image.creator = CreatorText(pro.data() + 8);

  Result<Header> headers[2] = {DecodeHeader(std::span<const uint8_t, kHeaderSize>(
                                                pro.data() + kHeaderOffset[0], kHeaderSize),
                                            kHeaderOffset[0], image.file_size),
                               DecodeHeader(std::span<const uint8_t, kHeaderSize>(
                                                pro.data() + kHeaderOffset[1], kHeaderSize),
                                            kHeaderOffset[1], image.file_size)};
  if (!headers[0] && !headers[1]) {
    return Annotate(headers[0].error(),
                    "no valid header (the second: " + headers[1].error().message + ")");
  }
  image.header_slot = !headers[0]                                   ? 1
                      : !headers[1]                                 ? 0
                      : headers[1]->sequence > headers[0]->sequence ? 1
                                                                    : 0;
  image.header = *headers[image.header_slot];
  if (lenient) {
    for (int i = 0; i < 2; ++i) {
      if (!headers[i]) image.problems.push_back(headers[i].error().message);
    }
  }
  VSTACK_RETURN_IF_ERROR(ReplayLog(device, q, &image, writable));

  Result<std::vector<Region>> tables[2] = {
      DecodeRegionTable(
          std::span<const uint8_t>(pro.data() + kRegionTableOffset[0], kRegionTableSize),
          kRegionTableOffset[0], image.file_size),
      DecodeRegionTable(
          std::span<const uint8_t>(pro.data() + kRegionTableOffset[1], kRegionTableSize),
          kRegionTableOffset[1], image.file_size)};
  if (!tables[0] && !tables[1]) return tables[0].error();
  const std::vector<Region>& regions = tables[0] ? *tables[0] : *tables[1];
  if (lenient && !tables[0]) image.problems.push_back(tables[0].error().message);
  bool have_bat = false, have_meta = false;
  for (const Region& r : regions) {
    if (r.id == kBatRegionGuid) image.bat_region = r, have_bat = true;
    if (r.id == kMetadataRegionGuid) image.metadata_region = r, have_meta = true;
  }
  if (!have_bat || !have_meta) {
    return MakeError(Errc::kCorruption, std::string("vhdx: the region table has no ") +
                                            (have_bat ? "metadata" : "BAT") + " region");
  }
  const Region& m = image.metadata_region;
  const Region& b = image.bat_region;
  const uint64_t log_end = image.header.log_offset + image.header.log_length;
  if ((m.offset < b.offset + b.length && b.offset < m.offset + m.length) ||
      (m.offset < log_end && image.header.log_offset < m.offset + m.length) ||
      (b.offset < log_end && image.header.log_offset < b.offset + b.length)) {
    return MakeError(Errc::kCorruption, "vhdx: the log, BAT and metadata regions overlap");
  }
  image.metadata_end = std::max({log_end, m.offset + m.length, b.offset + b.length});

  std::vector<uint8_t> meta(std::min<uint64_t>(m.length, kMiB));
  VSTACK_RETURN_IF_ERROR(ReadStructure(q, image, m.offset, meta));
  VSTACK_ASSIGN_OR_RETURN(image.metadata, DecodeMetadata(meta, m.offset, m.length));
  image.layout = BatLayout::For(image.metadata.virtual_size, image.metadata.block_size,
                                image.metadata.logical_sector);
  VSTACK_RETURN_IF_ERROR(LoadBat(device, q, &image, lenient));
  return image;
}

bool ProbeImage(BlockDevice& device, std::string* problem) {
  const uint64_t size = device.size_bytes();
  const uint32_t sector = device.geometry().logical_block;
  if (size < sector || sector > kHeaderOffset[0]) return false;
  SyncIo io(device);
  IoQueue* q = io.queue();
  if (q == nullptr) return false;
  std::vector<uint8_t> first(sector);
  if (!ReadAt(*q, 0, first) || std::memcmp(first.data(), "vhdxfile", 8) != 0) return false;
  // The identifier alone is a magic string: a VHDX also needs a header with a valid CRC-32C.
  std::string seen;
  if (size < kPrologueSize) {
    seen = "the file (" + std::to_string(size) + " bytes) is too small for the VHDX headers";
  }
  for (size_t i = 0; i < 2 && size >= kPrologueSize; ++i) {
    std::vector<uint8_t> bytes(kHeaderSize);
    Status read = ReadAt(*q, kHeaderOffset[i], bytes);
    if (!read) return false;  // an I/O error is no finding about the contents
    Result<Header> h = DecodeHeader(
        std::span<const uint8_t, kHeaderSize>(bytes.data(), kHeaderSize), kHeaderOffset[i], size);
    if (h) return true;
    seen += (i == 0 ? "" : "; ") + h.error().message;
  }
  if (problem != nullptr) *problem = "'vhdxfile' identifier at offset 0, but " + seen;
  return false;
}

}  // namespace vstack::vhdx
