// The crc32c device: formatting, opening and crash recovery, marking and cleaning regions,
// reporting and scrubbing. The data path is in crc32c_queue.cc.
#include "blockdev/crc32c/crc32c_device.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "blockdev/metastore/crc32c.h"
#include "blockdev/metastore/meta_store.h"
#include "blockdev/metastore/table_page.h"
#include "lib/aligned_buffer.h"
#include "lib/endian.h"
#include "lib/registry.h"
#include "lib/size.h"

namespace vstack {
namespace {

constexpr char kMagic[] = "VSCRC32C";
constexpr uint32_t kPayloadVersion = 1;
constexpr uint32_t kCrcTable = 0;    // 4-byte stored checksums, one per grain
constexpr uint32_t kDirtyTable = 1;  // 1-byte dirty flags, one per region
constexpr uint64_t kDataAlign = 1 << 20;

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// The layout for a device below of `lower_size` bytes: the most grains that fit after their
// metadata.
Result<Superblock> Plan(uint32_t grain, uint64_t lower_size) {
  const uint32_t per_region = TablePageCapacity(4);
  auto plan = [&](uint64_t grains) {
    Superblock sb;
    sb.magic = kMagic;
    sb.generation = 1;
    sb.journal_offset = kSuperblockBytes;
    sb.journal_bytes = 0;
    const uint64_t regions = (grains + per_region - 1) / per_region;
    TableDesc crc{kSuperblockBytes, grains, 4};
    TableDesc dirty{kSuperblockBytes + crc.bytes(), regions, 1};
    sb.tables = {crc, dirty};
    sb.data_offset = RoundUp(dirty.offset + dirty.bytes(), kDataAlign);
    ByteWriter w;
    w.U32(kPayloadVersion);
    w.U32(grain);
    w.U64(grains);
    sb.payload = std::move(w.bytes());
    return sb;
  };
  VSTACK_ASSIGN_OR_RETURN(
      UnitLayout layout,
      FitUnits(lower_size, grain, UINT64_MAX, plan,
               "crc32c: the device below (" + FormatSize(lower_size) + ") is too small"));
  return std::move(layout.sb);
}

}  // namespace

// Data stays in place: writes, discards and zeroes go down as they are, so FUA and fast
// zeroes are the device below's.
Crc32cDevice::Crc32cDevice(DevicePtr lower, uint32_t grain, Superblock sb, bool read_only)
    : GrainLayer("crc32c", std::move(lower), grain, sb.tables[kCrcTable].entries * grain,
                 sb.data_offset, kCapRead | kCapFlush,
                 kCapWrite | kCapDiscard | kCapWriteZeroes | kCapDiscardZeroes, read_only,
                 kCapFua | kCapFastZeroes),
      sb_(std::move(sb)),
      table_(sb_.tables[kCrcTable].entries, grain, TablePageCapacity(4)),
      read_only_(read_only),
      dirty_(sb_.tables[kDirtyTable].entries, 0) {
  DeclareCounters({"checksum_errors", "rmw_reads", "read_retries", "regions_marked",
                   "regions_cleaned"});
}

Result<DevicePtr> Crc32cDevice::Open(DevicePtr lower, uint32_t grain, bool grain_given,
                                     bool read_only, bool format) {
  const std::string who = "crc32c";
  VSTACK_ASSIGN_OR_RETURN(OpenedBelow below,
                          OpenSuperblock(*lower, kMagic, "crc32c", read_only, format));
  read_only = below.read_only;
  const uint64_t lower_size = below.lower_size;
  std::optional<Superblock>& sb = below.sb;
  if (!sb) {
    VSTACK_ASSIGN_OR_RETURN(Superblock planned, Plan(grain, lower_size));
    auto* dev = new Crc32cDevice(std::move(lower), grain, planned, read_only);
    DevicePtr owned(dev);
    if (read_only) return owned;  // blank: all zeros, which the zero checksums describe
    // Zero everything after the superblocks (data included: zero grains match a zero table),
    // then write both superblock slots.
    std::random_device rd;
    dev->sb_.volume_id = (uint64_t{rd()} << 32) ^ rd();
    dev->io_ = std::make_unique<SyncIo>(dev->lower_device());
    SyncIo& io = *dev->io_;
    // The tables zeroed and allocated (reserved: a full filesystem cannot fail marking a
    // region dirty), the data zeroed and unmapped.
    const uint64_t end = dev->sb_.data_offset + dev->geometry().size_bytes;
    const uint64_t data = dev->sb_.data_offset;
    if (std::error_code ec = io.WriteZeroes(kSuperblockBytes, data - kSuperblockBytes)) {
      return MakeError(ec, "crc32c: cannot reserve the metadata area: " + ec.message());
    }
    if (std::error_code ec = io.WriteZeroes(data, end - data, kIoMayUnmap)) {
      return MakeError(ec, "crc32c: cannot zero the device below: " + ec.message());
    }
    if (std::error_code ec = io.Flush()) {
      return MakeError(ec, "crc32c: flush after zeroing: " + ec.message());
    }
    Superblock first = dev->sb_;
    first.generation = 0;
    VSTACK_RETURN_IF_ERROR(WriteSuperblock(io, first, who));
    VSTACK_RETURN_IF_ERROR(WriteSuperblock(io, dev->sb_, who));
    dev->formatted_ = true;
    dev->set_formatted_now();
    return owned;
  }
  VSTACK_RETURN_IF_ERROR(ValidateLayout(*sb, lower_size, who));
  ByteReader r(sb->payload);
  const uint32_t version = r.U32();
  const uint32_t stored_grain = r.U32();
  const uint64_t grains = r.U64();
  const uint32_t per_region = TablePageCapacity(4);
  if (!r.ok() || version != kPayloadVersion || !ValidGrain(stored_grain) || sb->tables.size() != 2 ||
      sb->tables[kCrcTable].entries != grains || sb->tables[kCrcTable].entry_size != 4 ||
      sb->tables[kDirtyTable].entry_size != 1 ||
      sb->tables[kDirtyTable].entries != (grains + per_region - 1) / per_region ||
      sb->data_offset + grains * stored_grain > lower_size) {
    return MakeError(Errc::kCorruption, "crc32c: superblock: inconsistent geometry (grain " +
                                            std::to_string(stored_grain) + ", " +
                                            std::to_string(grains) + " grains, device below " +
                                            std::to_string(lower_size) + " bytes)");
  }
  if (grain_given && grain != stored_grain) {
    return FormattedWith("crc32c", "grain", std::to_string(stored_grain), std::to_string(grain));
  }
  auto* dev = new Crc32cDevice(std::move(lower), stored_grain, std::move(*sb), read_only);
  DevicePtr owned(dev);
  dev->formatted_ = true;
  dev->io_ = std::make_unique<SyncIo>(dev->lower_device());
  VSTACK_RETURN_IF_ERROR(dev->Load());
  VSTACK_RETURN_IF_ERROR(dev->Recover());
  return owned;
}

// Reads the dirty-region table and the checksum table (verifying every page).
Status Crc32cDevice::Load() {
  SyncIo& io = *io_;
  AlignedBuffer page(kMetaPageSize);
  const auto* p = reinterpret_cast<const uint8_t*>(page.data());
  for (uint32_t t : {kDirtyTable, kCrcTable}) {
    const TableDesc& d = sb_.tables[t];
    for (uint64_t n = 0; n < d.pages(); ++n) {
      const uint64_t offset = d.offset + n * kMetaPageSize;
      if (std::error_code ec = io.Read(offset, page.span())) {
        return MakeError(ec, "crc32c: cannot read metadata at offset " + std::to_string(offset) +
                                 ": " + ec.message());
      }
      Status page_ok = CheckTablePage(p, sb_.volume_id, t, n, offset, "crc32c");
      const uint32_t per = d.per_page();
      if (!page_ok) {
        // Both tables are overwritten in place, so a crash may tear a page sector by sector.
        // A torn dirty-flag page: all its regions count as dirty (recomputed from the data,
        // which is always safe). A torn checksum page (one per region): harmless if its
        // region is dirty, as the checksums are recomputed; otherwise corruption.
        if (t == kDirtyTable) {
          for (uint64_t r = n * per; r < std::min<uint64_t>((n + 1) * per, d.entries); ++r) {
            dirty_[r] = 1;
            table_.LoadDirty(r);
          }
          ++torn_pages_;
          continue;
        }
        if (!dirty_[n]) return page_ok;
        ++torn_pages_;
        continue;
      }
      for (uint32_t k = 0; k < per && n * per + k < d.entries; ++k) {
        const uint64_t index = n * per + k;
        if (t == kDirtyTable) {
          const uint8_t flag = p[kTablePageHeader + k];
          if (flag > 1) {
            return MakeError(Errc::kCorruption, "crc32c: dirty flag of region " +
                                                    std::to_string(index) + " is " +
                                                    std::to_string(flag));
          }
          dirty_[index] = flag;
          if (flag) table_.LoadDirty(index);
        } else {
          const uint32_t stored = LoadLE32(p + kTablePageHeader + 4 * k);
          if (stored) table_.LoadStored(index, stored);
        }
      }
    }
  }
  return OkStatus();
}

// Recomputes the checksums of every region a crash left dirty, from the data.
Status Crc32cDevice::Recover() {
  std::vector<uint64_t> dirty;
  for (uint64_t r = 0; r < dirty_.size(); ++r) {
    if (dirty_[r]) dirty.push_back(r);
  }
  if (dirty.empty()) return OkStatus();
  const uint32_t per = table_.grains_per_region();
  AlignedBuffer buf(uint64_t{per} * grain(),
                    std::max<uint64_t>(4096, lower_device().geometry().mem_alignment));
  for (uint64_t r : dirty) {
    const uint64_t first = r * per;
    const uint64_t n = std::min<uint64_t>(per, table_.grains() - first);
    const uint64_t offset = sb_.data_offset + first * grain();
    if (std::error_code ec = io_->Read(offset, buf.span().first(n * grain()))) {
      return MakeError(ec, "crc32c: recovery: cannot read region " + std::to_string(r) + ": " +
                               ec.message());
    }
    for (uint64_t i = 0; i < n; ++i) table_.Set(first + i, Crc32c(buf.data() + i * grain(), grain()));
    ++recovered_regions_;
  }
  if (read_only_) return OkStatus();  // recomputed in memory only
  return Commit(/*clean_all=*/true);
}

Status Crc32cDevice::WriteDirtyPages(const std::vector<uint64_t>& pages, IoFlags flags) {
  const TableDesc& d = sb_.tables[kDirtyTable];
  AlignedBuffer page(kMetaPageSize);
  auto* p = reinterpret_cast<uint8_t*>(page.data());
  for (uint64_t n : pages) {
    std::memset(p, 0, kMetaPageSize);
    const uint32_t per = d.per_page();
    for (uint32_t k = 0; k < per && n * per + k < d.entries; ++k) {
      p[kTablePageHeader + k] = dirty_[n * per + k];
    }
    SealTablePage(p, sb_.volume_id, kDirtyTable, n);
    const uint64_t offset = d.offset + n * kMetaPageSize;
    if (std::error_code ec = io_->Write(offset, page.span(), flags)) {
      return MakeError(ec, "crc32c: cannot write the dirty-region table at offset " +
                               std::to_string(offset) + ": " + ec.message());
    }
  }
  return OkStatus();
}

Status Crc32cDevice::MarkDirty(const std::vector<uint64_t>& regions) {
  std::lock_guard lock(meta_mu_);
  if (!formatted_ || read_only_) return MakeError(Errc::kReadOnly, "crc32c: read-only");
  std::vector<uint64_t> marked, pages;
  const uint32_t per = sb_.tables[kDirtyTable].per_page();
  for (uint64_t r : regions) {
    if (!table_.NeedsMark(r)) continue;  // another thread marked it meanwhile
    dirty_[r] = 1;
    marked.push_back(r);
    if (pages.empty() || pages.back() != r / per) pages.push_back(r / per);
  }
  if (marked.empty()) return OkStatus();
  VSTACK_RETURN_IF_ERROR(WriteDirtyPages(pages, kIoFua));
  table_.Marked(marked);
  CountShared(kRegionsMarked, marked.size());
  return OkStatus();
}

Status Crc32cDevice::Commit(bool clean_all) {
  std::lock_guard lock(meta_mu_);
  if (!formatted_ || read_only_) return OkStatus();
  std::vector<ChecksumTable::Clean> clean = table_.PickClean(clean_all);
  const TableDesc& crc = sb_.tables[kCrcTable];
  // Checksum pages of the regions to clean, written before the flush that makes them durable
  // along with the data they describe.
  std::vector<AlignedBuffer> pages;
  std::vector<IoRequest> reqs(clean.size());
  std::vector<iovec> iov(clean.size());
  for (size_t i = 0; i < clean.size(); ++i) {
    pages.emplace_back(kMetaPageSize);
    auto* p = reinterpret_cast<uint8_t*>(pages.back().data());
    for (size_t k = 0; k < clean[i].stored.size(); ++k) {
      StoreLE32(p + kTablePageHeader + 4 * k, clean[i].stored[k]);
    }
    SealTablePage(p, sb_.volume_id, kCrcTable, clean[i].region);
    iov[i] = pages.back().iov();
    reqs[i].op = Op::kWrite;
    reqs[i].offset = crc.offset + clean[i].region * kMetaPageSize;
    reqs[i].length = kMetaPageSize;
    reqs[i].iov = &iov[i];
    reqs[i].iovcnt = 1;
  }
  auto put_back = [&] {
    // Not cleaned after all: the regions stay dirty (on disk they still are).
    std::vector<uint64_t> regions;
    for (const auto& c : clean) regions.push_back(c.region);
    table_.Marked(regions);
  };
  if (!reqs.empty()) {
    IoQueue* q = io_->queue();
    if (q == nullptr) {
      put_back();
      return Annotate(io_->open_error(), "crc32c: no queue for metadata");
    }
    if (std::error_code ec = RunRequests(*q, reqs)) {
      put_back();
      return MakeError(ec, "crc32c: cannot write the checksum table: " + ec.message());
    }
  }
  if (std::error_code ec = io_->Flush()) {
    put_back();
    return MakeError(ec, "crc32c: flush of the device below failed: " + ec.message());
  }
  if (clean.empty()) return OkStatus();
  std::vector<uint64_t> dirty_pages;
  const uint32_t per = sb_.tables[kDirtyTable].per_page();
  for (const auto& c : clean) {
    dirty_[c.region] = 0;
    if (dirty_pages.empty() || dirty_pages.back() != c.region / per) {
      dirty_pages.push_back(c.region / per);
    }
  }
  CountShared(kRegionsCleaned, clean.size());
  // Clearing a bit needs no flush of its own: if it is lost, the region is merely recomputed.
  VSTACK_RETURN_IF_ERROR(WriteDirtyPages(dirty_pages, clean_all ? IoFlags{kIoFua} : IoFlags{0}));
  return OkStatus();
}

void Crc32cDevice::RecordMismatch(uint64_t offset) {
  mismatches_.fetch_add(1);
  last_mismatch_.store(offset);
  CountShared(kChecksumErrors);
}

Result<std::unique_ptr<IoQueue>> Crc32cDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return NewCrc32cQueue(*this, std::move(lower));
}

Status Crc32cDevice::CloseLayer() {
  Status s = Commit(/*clean_all=*/true);
  std::lock_guard lock(meta_mu_);
  io_.reset();
  return s;
}

std::string Crc32cDevice::Describe() const {
  return "crc32c grain=" + FormatSize(grain()) + ", " + std::to_string(table_.grains()) + " grains";
}

std::optional<SpaceUsage> Crc32cDevice::Space() const {
  SpaceUsage s;
  const LayerStats st = Counts();  // no histogram merge
  s.grain_bytes = grain();
  s.logical_bytes_written = st.of(Op::kWrite).bytes + st.of(Op::kWriteZeroes).bytes;
  s.logical_bytes_live = geometry().size_bytes;
  s.zero_grains = table_.zero_grains();
  s.unique_grains = table_.grains() - s.zero_grains;
  s.compressed_bytes = s.stored_bytes = s.physical_bytes_used = geometry().size_bytes;
  s.metadata_bytes = sb_.data_offset;
  return s;
}

void Crc32cDevice::Properties(PropertyList& out) const {
  out.push_back({"grain", uint64_t{grain()}, "bytes"});
  out.push_back({"grains", table_.grains(), ""});
  out.push_back({"regions", table_.regions(), ""});
  out.push_back({"dirty_regions", table_.dirty_regions(), ""});
  out.push_back({"recovered_regions", recovered_regions_, ""});
  out.push_back({"torn_pages", torn_pages_, ""});
  out.push_back({"data_offset", sb_.data_offset, "bytes"});
  out.push_back({"checksum_mismatches", mismatches(), ""});
  if (mismatches()) out.push_back({"last_mismatch_offset", last_mismatch_offset(), ""});
  if (auto s = Space()) AppendSpaceProperties(*s, out);
}

Status Crc32cDevice::Check(CheckMode mode, CheckResult* out) {
  Status s = CheckGrains(mode, out);
  // Release the metadata queue, so that the device below can be repaired next.
  std::lock_guard lock(meta_mu_);
  if (io_) io_ = std::make_unique<SyncIo>(lower_device());
  return s;
}

Status Crc32cDevice::CheckGrains(CheckMode mode, CheckResult* out) {
  SyncIo io(lower_device());
  constexpr uint64_t kChunk = 1 << 20;
  const uint64_t size = geometry().size_bytes;
  AlignedBuffer buf(std::max<uint64_t>(kChunk, grain()),
                    std::max<uint64_t>(4096, lower_device().geometry().mem_alignment));
  constexpr uint64_t kMaxMessages = 100;
  uint64_t bad = 0;
  std::vector<uint64_t> repaired_regions;
  for (uint64_t off = 0; off < size; off += buf.size()) {
    const uint64_t n = std::min<uint64_t>(buf.size(), size - off);
    if (std::error_code ec = io.Read(sb_.data_offset + off, buf.span().first(n))) {
      return MakeError(ec, "crc32c: check: cannot read offset " + std::to_string(off) + ": " +
                               ec.message());
    }
    for (uint64_t g = 0; g < n; g += grain()) {
      const uint64_t index = (off + g) / grain();
      const uint32_t actual = Crc32c(buf.data() + g, grain());
      const uint32_t stored = table_.crc(index);
      if (actual == stored) continue;
      ++bad;
      if (bad <= kMaxMessages) {
        out->Corruption("crc32c: checksum mismatch in the grain at offset " +
                        std::to_string(off + g) + " (stored " + std::to_string(stored) +
                        ", data " + std::to_string(actual) + ")");
      } else {
        ++out->corruptions;
      }
      if (mode == CheckMode::kRepairAll && !read_only_) {
        // The data is what it is; accepting it makes reads succeed again (the damage stays).
        table_.Set(index, actual);
        repaired_regions.push_back(index / table_.grains_per_region());
        ++out->repaired;
      }
    }
  }
  if (bad > kMaxMessages) {
    out->messages.push_back("ERROR crc32c: " + std::to_string(bad - kMaxMessages) +
                            " more checksum mismatches");
  }
  if (!repaired_regions.empty()) {
    // Persist the accepted checksums: mark their regions dirty, then clean them.
    repaired_regions.erase(std::unique(repaired_regions.begin(), repaired_regions.end()),
                           repaired_regions.end());
    VSTACK_RETURN_IF_ERROR(MarkDirty(repaired_regions));
    return Commit(/*clean_all=*/true);
  }
  return OkStatus();
}

namespace {

ComponentInfo Crc32cComponent() {
  ComponentInfo c;
  c.name = "crc32c";
  c.kind = ComponentKind::kLayer;
  c.summary = "a CRC-32C per grain, stored persistently and verified on every read";
  c.options = {{"grain", "checksum grain: a power of two from 4K to 64K", "4K"},
               FormatOptionInfo()};
  c.open_layer = [](DevicePtr lower, const OptionValues& values,
                    const OpenOptions& open) -> Result<DevicePtr> {
    VSTACK_ASSIGN_OR_RETURN(GrainOptions o, ParseGrainOptions(values, 0, "crc32c", false));
    return Crc32cDevice::Open(std::move(lower), o.grain, o.grain_given, open.read_only, o.format);
  };
  return c;
}

}  // namespace

VSTACK_REGISTER_COMPONENT(crc32c, Crc32cComponent());

}  // namespace vstack
