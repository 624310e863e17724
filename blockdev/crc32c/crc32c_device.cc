// The crc32c layer: its policy (checksum on write, verify on read), its metadata (format,
// load, crash recovery, marking and cleaning regions through MetaStore's table pages), reports,
// check and registration.
#include "blockdev/crc32c/crc32c_device.h"

#include <algorithm>

#include "blockdev/metastore/crc32c.h"
#include "blockdev/metastore/table_page.h"
#include "lib/cpu_tag.h"
#include "lib/plural.h"
#include "lib/aligned_buffer.h"
#include "lib/endian.h"
#include "lib/entropy.h"
#include "lib/registry.h"
#include "lib/size.h"

namespace vstack {
namespace {

constexpr char kMagic[] = "VSCRC32C";
constexpr uint32_t kPayloadVersion = 1;
constexpr uint32_t kCrcTable = 0;    // 4-byte stored checksums, one per grain
constexpr uint32_t kDirtyTable = 1;  // 1-byte dirty flags, one per region

// The layout for a device below of `lower_size` bytes: the most grains that fit after their
// metadata (the two tables right after the superblocks, no journal; data from the next MiB).
Result<Superblock> Plan(uint32_t grain, uint64_t lower_size) {
  auto plan = [&](uint64_t grains) {
    const uint64_t regions = (grains + Crc32cDevice::kPerRegion - 1) / Crc32cDevice::kPerRegion;
    ByteWriter w;
    w.U32(kPayloadVersion);
    w.U32(grain);
    w.U64(grains);
    return MetaStore::Plan(kMagic, {TableDesc{0, grains, 4}, TableDesc{0, regions, 1}},
                           /*journal_bytes=*/0, std::move(w.bytes()));
  };
  VSTACK_ASSIGN_OR_RETURN(
      UnitLayout layout,
      FitUnits(lower_size, grain, UINT64_MAX, plan,
               "crc32c: the device below (" + FormatSize(lower_size) + ") is too small"));
  return std::move(layout.sb);
}

}  // namespace

const uint32_t Crc32cDevice::kPerRegion = TablePageCapacity(4);
const GrainFormat Crc32cDevice::kFormat = {
    "crc32c", kMagic, kPayloadVersion, kPayloadVersion, /*entry_bytes=*/4, 0, false, 0,
    UINT64_MAX};

// Data stays in place: writes, discards and zeroes go down as they are, so FUA and fast zeroes
// are the device below's.
Crc32cDevice::Crc32cDevice(DevicePtr lower, uint32_t grain, Superblock sb, bool read_only)
    : GrainDevice(kFormat, std::move(lower), grain, sb.tables[kCrcTable].entries * grain,
                  /*units=*/0, sb.data_offset, nullptr, read_only, kCapRead | kCapFlush,
                  kCapWrite | kCapDiscard | kCapWriteZeroes | kCapDiscardZeroes,
                  kCapFua | kCapFastZeroes, /*verifies_reads=*/true,
                  {"checksum_errors", "regions_marked", "regions_cleaned"}),
      sb_(std::move(sb)),
      zero_crc_(Crc32c(std::vector<uint8_t>(grain, 0).data(), grain)),
      regions_(sb_.tables[kDirtyTable].entries),
      unknown_(sb_.tables[kCrcTable].entries),
      dirty_(sb_.tables[kDirtyTable].entries, 0) {}

Result<DevicePtr> Crc32cDevice::Open(DevicePtr lower, const GrainOptions& o, bool read_only) {
  VSTACK_ASSIGN_OR_RETURN(OpenedBelow below,
                          OpenSuperblock(*lower, kMagic, "crc32c", read_only, o.format));
  read_only = below.read_only;
  const uint64_t lower_size = below.lower_size;
  if (!below.sb) {
    VSTACK_ASSIGN_OR_RETURN(Superblock planned, Plan(o.grain, lower_size));
    auto* dev = new Crc32cDevice(std::move(lower), o.grain, std::move(planned), read_only);
    DevicePtr owned(dev);
    // Read-only, it stays blank: all zeros, which the zero checksums describe.
    if (!read_only) VSTACK_RETURN_IF_ERROR(dev->Format());
    if (read_only) dev->set_presented_blank();  // which GrainDevice::Check refuses to check
    return owned;
  }
  Superblock& sb = *below.sb;
  ByteReader r(sb.payload);
  const uint32_t version = r.U32();
  const uint32_t stored_grain = r.U32();
  const uint64_t grains = r.U64();
  if (!r.ok() || version != kPayloadVersion || !ValidGrain(stored_grain) || sb.tables.size() != 2 ||
      sb.tables[kCrcTable].entries != grains || sb.tables[kCrcTable].entry_size != 4 ||
      sb.tables[kDirtyTable].entry_size != 1 ||
      sb.tables[kDirtyTable].entries != (grains + kPerRegion - 1) / kPerRegion) {
    return MakeError(Errc::kCorruption, "crc32c: superblock: inconsistent geometry (grain " +
                                            std::to_string(stored_grain) + ", " +
                                            Counted(grains, "grain", "grains") + ", device below " +
                                            std::to_string(lower_size) + " bytes)");
  }
  if (DataAreaPastEnd(sb.data_offset, grains, stored_grain, lower_size)) {
    return TruncatedBelow("crc32c", *lower, DataAreaEnd(sb.data_offset, grains, stored_grain));
  }
  VSTACK_RETURN_IF_ERROR(ValidateLayout(sb, lower_size, "crc32c"));
  if (o.grain_given && o.grain != stored_grain) {
    return FormattedWith("crc32c", "grain", std::to_string(stored_grain), std::to_string(o.grain));
  }
  auto* dev = new Crc32cDevice(std::move(lower), stored_grain, std::move(sb), read_only);
  DevicePtr owned(dev);
  dev->formatted_ = true;
  dev->io_ = std::make_unique<SyncIo>(dev->lower_device());
  VSTACK_RETURN_IF_ERROR(dev->Load());
  VSTACK_RETURN_IF_ERROR(dev->Recover());
  return owned;
}

// Zeroes everything after the superblocks (data included: zero grains match a zero table), then
// writes both superblock slots.
Status Crc32cDevice::Format() {
  sb_.volume_id = RandomBits64();
  io_ = std::make_unique<SyncIo>(lower_device());
  // The data zeroed and unmapped; then the tables zeroed and allocated (reserved: a full
  // filesystem cannot fail marking a region dirty), flushed, and the superblocks.
  if (std::error_code ec = io_->WriteZeroes(sb_.data_offset, geometry().size_bytes, kIoMayUnmap)) {
    return MakeError(ec, "crc32c: cannot zero the device below: " + ec.message());
  }
  VSTACK_RETURN_IF_ERROR(FormatMetadata(*io_, sb_, "crc32c"));
  formatted_ = true;
  set_formatted_now();
  return OkStatus();
}

// Reads the dirty-region table, then the checksum table (verifying every page). Both are
// overwritten in place, so a crash may tear a page sector by sector.
//
// A torn dirty-flag page holds, byte by byte, either the flags of its last durable write or those
// of the write the crash cut, and both are safe to use: a region is durably marked dirty (FUA)
// before any data goes to it, and cleaned only after its checksums are durable (Commit). So a
// torn page's flags are taken as read, and only its own regions marked dirty are recomputed. A
// page that cannot be a tear (another page's number, bytes past the flags) and a page with a flag
// other than 0 or 1 are damage: all its regions are taken as dirty (recomputed from the data, which
// loses nothing but the detection of damage already in them), and Check reports it. A torn checksum
// page (one per region) is harmless if its region is dirty, else corruption.
Status Crc32cDevice::Load() {
  const uint32_t per = sb_.tables[kDirtyTable].per_page();
  const uint64_t table_offset = sb_.tables[kDirtyTable].offset;
  VSTACK_RETURN_IF_ERROR(ReadTablePages(
      *io_, sb_, kDirtyTable, "crc32c", [&](uint64_t n, const uint8_t* p, const Status& ok) {
        const uint64_t first = n * per, end = std::min<uint64_t>(first + per, regions_.size());
        const uint8_t* flags = p + kTablePageHeader;  // of regions first..end-1
        const bool damaged =
            std::any_of(flags, flags + end - first, [](uint8_t f) { return f > 1; }) ||
            (!ok && !TornTablePage(p, n, end - first));
        uint64_t dirty = 0, lo = end, hi = first;  // the regions taken as dirty: [lo, hi)
        for (uint64_t r = first; r < end; ++r) {
          const uint8_t flag = damaged ? 1 : flags[r - first];
          dirty_[r] = flag;
          dirty += flag;
          if (flag) {
            regions_.LoadDirty(r);
            lo = std::min(lo, r);
            hi = r + 1;
          }
        }
        if (!ok || damaged) {
          ++torn_pages_;
          bad_dirty_pages_.push_back(
              {n, table_offset + n * kMetaPageSize, first, damaged, dirty, lo, hi});
        }
        return OkStatus();
      }));
  return ReadTablePages(
      *io_, sb_, kCrcTable, "crc32c", [&](uint64_t n, const uint8_t* p, const Status& ok) {
        if (!ok) {
          if (!dirty_[n]) return ok;
          ++torn_pages_;
          return OkStatus();
        }
        for (uint64_t k = 0; k < kPerRegion && n * kPerRegion + k < map().grains(); ++k) {
          map().Load(n * kPerRegion + k, LoadLE32(p + kTablePageHeader + 4 * k));
        }
        return OkStatus();
      });
}

Status Crc32cDevice::Recover() {
  for (uint64_t r = 0; r < regions_.size(); ++r) {
    if (!dirty_[r]) continue;
    VSTACK_RETURN_IF_ERROR(Recompute(r));
    ++recovered_regions_;
  }
  map().FinishLoad();
  if (read_only()) return OkStatus();  // in memory only
  // Clean them now, and rewrite the pages that failed their check. An open must not need new
  // space: if the device below is full (a table page not yet allocated on a thin device below),
  // they stay dirty, and a later commit cleans them (a crash before that recomputes them again).
  Status s = recovered_regions_ > 0 ? Commit(CommitKind::kClose) : OkStatus();
  if (s && !bad_dirty_pages_.empty()) {
    std::lock_guard lock(meta_mu_);
    std::vector<uint64_t> firsts;  // a region of each page: WriteDirtyPages writes its page
    for (const BadDirtyPage& b : bad_dirty_pages_) firsts.push_back(b.first_region);
    s = WriteDirtyPages(firsts, kIoFua);
    bad_dirty_pages_rewritten_ = static_cast<bool>(s);
  }
  if (!s && s.error().code == std::errc::no_space_on_device) return OkStatus();
  return s;
}

void Crc32cDevice::ReportBadDirtyPages(CheckResult* out) const {
  const uint64_t region_bytes = uint64_t{kPerRegion} * grain();
  for (const BadDirtyPage& b : bad_dirty_pages_) {
    std::string what =
        "crc32c: dirty-flag page " + std::to_string(b.page) + " at offset " +
        std::to_string(b.offset) + " of the device below " +
        (b.damaged ? "is damaged (no torn write looks like it): all "
                   : "failed its checksum (a crash tore its write, or it is damaged): its flags "
                     "were taken as read, and the ") +
        Counted(b.dirty, "region", "regions") +
        (b.damaged ? " it covers were taken as dirty" : " they mark dirty");
    if (b.dirty > 0) {
      what += std::string(b.damaged      ? " and their"
                          : b.dirty == 1 ? " had its"
                                         : " had their") +
              " checksums recomputed from the data, so damage already in that data (virtual "
              "bytes " +
              std::to_string(b.lo * region_bytes) + " to " +
              std::to_string(std::min(b.hi * region_bytes, geometry().size_bytes)) +
              ") cannot be detected";
    }
    if (bad_dirty_pages_rewritten_) {
      out->messages.push_back("Repaired: " + what + "; the page is rewritten");
      ++out->repaired;
    } else if (b.damaged) {
      out->Corruption(what + "; `vstack check -r all` rewrites the page");
    } else {
      out->messages.push_back(what + "; the next writable open rewrites the page");
    }
  }
}

Status Crc32cDevice::Recompute(uint64_t r) {
  const uint64_t first = r * kPerRegion;
  const uint64_t n = std::min<uint64_t>(kPerRegion, map().grains() - first);
  AlignedBuffer buf(n * grain(), std::max<uint64_t>(4096, lower_device().geometry().mem_alignment));
  if (std::error_code ec = io_->Read(data_offset() + first * grain(), buf.span())) {
    return MakeError(ec, "crc32c: cannot read region " + std::to_string(r) +
                             " to recompute its checksums: " + ec.message());
  }
  for (uint64_t i = 0; i < n; ++i) {
    map().Load(first + i, EntryOf(Crc32c(buf.data() + i * grain(), grain())));
  }
  for (uint64_t g = first; g < first + n; ++g) unknown_.Clear(g, std::memory_order_relaxed);
  return OkStatus();
}

bool Crc32cDevice::AnyUnknown(uint64_t r) const {
  const uint64_t end = std::min<uint64_t>((r + 1) * kPerRegion, map().grains());
  return unknown_.NextSet(r * kPerRegion, end) < end;
}

// ---------------------------------------------------------------------------------------------
// The policy

Encoded Crc32cDevice::Encode(QueueState*, const GrainWrite& w, const std::byte* bytes) {
  internal::PhaseScope checksum(*this, CpuPhase::kChecksum);
  // Known again once this write lands (WriteFailed if it fails).
  unknown_.Clear(w.grain, std::memory_order_relaxed);
  return {Encoded::kStore, EntryOf(Crc32c(bytes, grain())), w.grain};
}

bool Crc32cDevice::VerifyRead(uint64_t grain, uint64_t entry, const iovec* iov, uint32_t iovcnt,
                              uint64_t off, bool last_try) {
  internal::PhaseScope checksum(*this, CpuPhase::kChecksum);
  if (EntryOf(Crc32cIov(iov, iovcnt, off, this->grain())) == entry) return true;
  // A grain whose write failed left old or new sectors: either is right.
  if (unknown_.Test(grain)) return true;
  if (last_try) {
    last_mismatch_.store(grain * this->grain());
    CountShared(kChecksumErrors);
  }
  return false;
}

Status Crc32cDevice::BeforeWrite(GrainIo& io, uint64_t first, uint64_t count) {
  std::vector<uint64_t> to_mark;
  regions_.Touch(RegionOf(first), RegionOf(first + count - 1), &to_mark);
  if (to_mark.empty()) return OkStatus();
  io.Quiesce();  // marking blocks
  internal::PhaseScope metadata(*this, CpuPhase::kMetadata);
  return MarkDirty(to_mark);  // (failed: the engine still calls AfterWrite)
}

void Crc32cDevice::AfterWrite(uint64_t first, uint64_t count) {
  regions_.Untouch(RegionOf(first), RegionOf(first + count - 1));
}

// The region is durably dirty (BeforeWrite), so a crash recomputes these grains' checksums; a
// commit that cleans the region recomputes them first (Commit).
void Crc32cDevice::WriteFailed(uint64_t first, uint64_t count) {
  for (uint64_t g = first; g < first + count; ++g) unknown_.Set(g, std::memory_order_relaxed);
}

GrainDevice::ScrubFinding Crc32cDevice::ScrubGrain(uint64_t grain, uint64_t entry,
                                                   const std::byte* stored, uint32_t length,
                                                   CheckMode mode) {
  const uint32_t actual = EntryOf(Crc32c(stored, length));
  // (Unknown: recomputed at the next commit.)
  if (actual == entry || unknown_.Test(grain)) return {};
  std::string problem = "crc32c: checksum mismatch in the grain at offset " +
                        std::to_string(grain * length) + " (stored " +
                        std::to_string(entry ^ zero_crc_) + ", data " +
                        std::to_string(actual ^ zero_crc_) + ")";
  if (mode != CheckMode::kRepairAll || read_only()) return problem;
  // The data is what it is; accepting it makes reads succeed again (the damage stays). Its
  // region is marked dirty first, so the engine's commit at the end of the check cleans it,
  // writing the accepted checksum.
  if (Status s = MarkDirty({RegionOf(grain)}); !s) {
    return problem + "; accepting the data's checksum failed: " + s.error().ToString();
  }
  map().Load(grain, actual);
  return {problem + " (the data's checksum accepted)", true};
}

// ---------------------------------------------------------------------------------------------
// Metadata

Status Crc32cDevice::WriteDirtyPages(const std::vector<uint64_t>& regions, IoFlags flags) {
  const uint32_t per = sb_.tables[kDirtyTable].per_page();
  std::vector<uint64_t> pages;
  for (uint64_t r : regions) {
    if (pages.empty() || pages.back() != r / per) pages.push_back(r / per);
  }
  return WriteTablePages(
      *io_, sb_, kDirtyTable, pages,
      [&](uint64_t n, uint8_t* e) {
        for (uint64_t r = n * per; r < std::min<uint64_t>((n + 1) * per, dirty_.size()); ++r) {
          e[r - n * per] = dirty_[r];
        }
      },
      flags, "crc32c");
}

Status Crc32cDevice::MarkDirty(const std::vector<uint64_t>& regions) {
  std::lock_guard lock(meta_mu_);
  if (!formatted_ || read_only()) return MakeError(Errc::kReadOnly, "crc32c: read-only");
  std::vector<uint64_t> marked;
  for (uint64_t r : regions) {
    if (regions_.dirty(r)) continue;  // another thread marked it meanwhile
    dirty_[r] = 1;
    marked.push_back(r);
  }
  VSTACK_RETURN_IF_ERROR(WriteDirtyPages(marked, kIoFua));
  regions_.Marked(marked);
  CountShared(kRegionsMarked, marked.size());
  return OkStatus();
}

Status Crc32cDevice::Commit(CommitKind kind) {
  internal::PhaseScope metadata(*this, CpuPhase::kMetadata);
  std::lock_guard lock(meta_mu_);
  if (!formatted_ || read_only()) return OkStatus();
  std::vector<uint64_t> clean = regions_.PickClean(kind == CommitKind::kClose);
  // A region with grains whose write failed: their checksums from the data first (quiet: a
  // new write to it waits in MarkDirty for meta_mu_). Unreadable, it stays dirty.
  std::erase_if(clean, [&](uint64_t r) {
    if (!AnyUnknown(r) || Recompute(r)) return false;
    regions_.Marked({r});
    return true;
  });
  // Their checksum pages, written before the flush that makes them durable along with the
  // data they describe; then their flags cleared (if that is lost, they are merely recomputed).
  Status s = WriteTablePages(
      *io_, sb_, kCrcTable, clean,
      [&](uint64_t r, uint8_t* e) {
        for (uint64_t k = 0; k < kPerRegion && r * kPerRegion + k < map().grains(); ++k) {
          StoreLE32(e + 4 * k, static_cast<uint32_t>(map().Get(r * kPerRegion + k)));
        }
      },
      0, "crc32c");
  if (s) {
    if (std::error_code ec = io_->Flush()) {
      s = MakeError(ec, "crc32c: flush of the device below failed: " + ec.message());
    }
  }
  if (!s) {
    regions_.Marked(clean);  // not cleaned after all: on disk they are still dirty
    return s;
  }
  for (uint64_t r : clean) dirty_[r] = 0;
  CountShared(kRegionsCleaned, clean.size());
  return WriteDirtyPages(clean, kind == CommitKind::kClose ? IoFlags{kIoFua} : IoFlags{0});
}

Status Crc32cDevice::CloseLayer() {
  Status s = Commit(CommitKind::kClose);
  std::lock_guard lock(meta_mu_);
  io_.reset();
  return s;
}

// ---------------------------------------------------------------------------------------------
// Reporting and registration

Status Crc32cDevice::Check(CheckMode mode, CheckResult* out) {
  CheckSuperblockSlots(
      sb_, "crc32c", mode != CheckMode::kReadOnly && formatted_ && !read_only(),
      [&] {
        std::lock_guard lock(meta_mu_);
        return WriteNextGeneration(*io_, &sb_, "crc32c");
      },
      out);
  ReportBadDirtyPages(out);
  Status s = GrainDevice::Check(mode, out);
  std::lock_guard lock(meta_mu_);
  if (io_) io_ = std::make_unique<SyncIo>(lower_device());  // release the queue below
  return s;
}

std::string Crc32cDevice::Describe() const {
  return "crc32c grain=" + FormatSize(grain()) + ", " + Counted(map().grains(), "grain", "grains");
}

std::optional<SpaceUsage> Crc32cDevice::Space() const {
  SpaceUsage s = BaseSpace();
  s.logical_bytes_live = geometry().size_bytes;
  s.zero_grains = map().grains() - usage().live;  // checksum of a zero grain: entry 0
  s.unique_grains = map().grains() - s.zero_grains;
  s.compressed_bytes = s.stored_bytes = s.physical_bytes_used = geometry().size_bytes;
  s.data_offset = 0;
  return s;
}

void Crc32cDevice::Properties(PropertyList& out) const {
  BaseProperties(out);
  out.push_back({"regions", regions_.size(), ""});
  out.push_back({"dirty_regions", regions_.dirty_count(), ""});
  out.push_back({"recovered_regions", recovered_regions_, ""});
  out.push_back({"torn_pages", torn_pages_, ""});
  out.push_back({"dirty_table_offset", sb_.tables[kDirtyTable].offset, "bytes"});
  out.push_back({"checksum_mismatches", mismatches(), ""});
  if (mismatches()) out.push_back({"last_mismatch_offset", last_mismatch_offset(), ""});
  if (auto s = Space()) AppendSpaceProperties(*s, out);
}

namespace {

// grain and format (crc32c is not thin: no size).
Result<GrainOptions> ParseCrc32cOptions(const OptionValues& values, uint64_t lower_size) {
  return ParseGrainOptions(values, lower_size, "crc32c", /*with_size=*/false);
}

ComponentInfo Crc32cComponent() {
  return LayerComponent("crc32c",
                        "a CRC-32C per grain, stored persistently and verified on every read",
                        GrainOptionInfos("checksum", /*with_size=*/false),
                        &OpenGrainLayer<Crc32cDevice, ParseCrc32cOptions>);
}

}  // namespace

VSTACK_REGISTER_COMPONENT(crc32c, Crc32cComponent());

}  // namespace vstack
