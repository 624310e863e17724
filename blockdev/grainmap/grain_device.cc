// GrainDevice: opening, loading, committing, reporting and checking, for every grain layer. The
// data path is grain_queue.cc.
#include "blockdev/grainmap/grain_device.h"

#include <algorithm>
#include <cstring>

#include "blockdev/grainmap/grain_queue.h"
#include "lib/cpu_tag.h"
#include "lib/endian.h"
#include "lib/size.h"
#include "lib/sync_io.h"

namespace vstack {
namespace {

constexpr uint32_t kMapTable = 0;   // entry_bytes per virtual grain
constexpr uint32_t kUnitTable = 1;  // unit_record_bytes per unit
// Free units kept for reuse before any is discarded below, and the shortest run discarded
// between closes (as OpenZFS's autotrim skips extents below zfs_trim_extent_bytes_min, 32 KiB):
// a lone unit is likely reused soon, and a hole punch costs a file about one I/O.
constexpr uint64_t kKeepStaleBytes = 4 << 20;
constexpr uint64_t kMinDiscardRunBytes = 32 << 10;
// Map records journaled between group ends: a commit that the journal cannot take at once is
// split only there. Any split is consistent: unit records go first, and each map record stands
// on its own.
constexpr size_t kRecordsPerGroup = 256;

}  // namespace

GrainDevice::GrainDevice(const GrainFormat& format, DevicePtr lower, uint32_t grain,
                         uint64_t size, uint64_t units, uint64_t data_offset,
                         std::unique_ptr<MetaStore> store, bool read_only, Capabilities own,
                         Capabilities writes, Capabilities writes_from_below, bool verifies_reads,
                         const std::vector<std::string>& counters)
    : GrainLayer(format.name, std::move(lower), grain, size, data_offset, own, writes, read_only,
                 writes_from_below),
      format_(format),
      map_(size / grain, format.entry_bytes, units),
      store_(std::move(store)),
      verifies_reads_(verifies_reads) {
  if (store_) commit_threshold_ = store_->superblock().journal_bytes / 4;
  std::vector<std::string> names = {"zero_grains", "rmw_reads", "retries",         "commits",
                                    "discards",    "discarded_bytes", "durable_wait_us"};
  names.insert(names.end(), counters.begin(), counters.end());
  DeclareCounters(std::move(names));
}

std::vector<OptionInfo> GrainOptionInfos(const char* what, bool with_size) {
  std::vector<OptionInfo> o = {
      {"grain", std::string(what) + " grain: a power of two from 4K to 64K", "4K"}};
  if (with_size) o.push_back({"size", "virtual size (thin; default: the size of the device below)", ""});
  o.push_back(FormatOptionInfo());
  return o;
}

// ---------------------------------------------------------------------------------------------
// Opening

std::vector<uint8_t> GrainDevice::EncodeHeader(const GrainFormat& f, uint32_t grain, uint64_t size,
                                               uint64_t units,
                                               const std::function<void(ByteWriter&)>& extra) {
  ByteWriter w;
  w.U32(f.version);
  w.U32(grain);
  extra(w);
  w.U64(size);
  w.U64(units);
  return std::move(w.bytes());
}

Result<DevicePtr> GrainDevice::OpenJournaled(const GrainFormat& f, DevicePtr lower,
                                             const GrainOptions& o, bool read_only,
                                             const std::function<void(ByteWriter&)>& write_extra,
                                             const ReadExtra& read_extra, const MakeDevice& make,
                                             const std::function<Status()>& check_new) {
  const std::string name = f.name;
  VSTACK_ASSIGN_OR_RETURN(OpenedBelow below,
                          OpenSuperblock(*lower, f.magic, f.name, read_only, o.format));
  read_only = below.read_only;
  const uint64_t lower_size = below.lower_size;
  if (!below.sb) {  // blank: format it (or, read-only, present it empty)
    if (check_new) VSTACK_RETURN_IF_ERROR(check_new());
    Header h{f.version, o.grain, o.size, 0};
    VSTACK_ASSIGN_OR_RETURN(
        UnitLayout layout,
        FitUnits(
            lower_size, o.grain, f.max_units,
            [&](uint64_t units) {
              return MetaStore::Plan(f.magic, f.Tables(o.size / o.grain, units),
                                     GrainJournalBytes(lower_size),
                                     EncodeHeader(f, o.grain, o.size, units, write_extra));
            },
            name + ": the device below (" + FormatSize(lower_size) +
                ") is too small for the metadata of a " + FormatSize(o.size) + " " + name +
                " device"));
    h.units = layout.units;
    std::unique_ptr<MetaStore> store;
    if (!read_only) {
      VSTACK_ASSIGN_OR_RETURN(store, MetaStore::Format(*lower, layout.sb, name));
    }
    DevicePtr dev(make(std::move(lower), h, std::move(store), layout.sb.data_offset, read_only));
    auto& g = static_cast<GrainDevice&>(*dev);
    VSTACK_RETURN_IF_ERROR(g.Load(/*blank=*/true));
    if (read_only) {
      g.set_presented_blank();
    } else {
      g.set_formatted_now();
    }
    return dev;
  }
  Superblock& sb = *below.sb;
  ByteReader r(sb.payload);
  Header h;
  h.version = r.U32();
  h.grain = r.U32();
  const std::string where = name + ": superblock: ";
  if (r.ok() && (h.version > f.version || h.version < f.oldest_version)) {
    return MakeError(Errc::kNotSupported,
                     where + "format version " + std::to_string(h.version) + ", but this vstack " +
                         "reads versions " + std::to_string(f.oldest_version) + " to " +
                         std::to_string(f.version) +
                         (h.version > f.version ? ": open it with a newer vstack" : ""));
  }
  Status extra = read_extra(r, h);
  h.size = r.U64();
  h.units = r.U64();
  if (!r.ok()) return MakeError(Errc::kCorruption, where + "truncated " + name + " fields");
  // The grain first: every test after it divides by it.
  const bool tables_ok = ValidGrain(h.grain) && sb.tables.size() == 2 &&
                         sb.tables[0].entries == h.size / h.grain &&
                         sb.tables[1].entries == h.units &&
                         sb.tables[0].entry_size == f.entry_bytes &&
                         sb.tables[1].entry_size == f.unit_entry_bytes;
  if (!tables_ok || h.size == 0 || h.size % h.grain || h.size / h.grain > f.max_grains ||
      h.units == 0 || h.units > f.max_units) {
    return MakeError(Errc::kCorruption,
                     where + "inconsistent geometry (grain " + std::to_string(h.grain) +
                         ", size " + std::to_string(h.size) + ", " + std::to_string(h.units) +
                         " units, device below " + std::to_string(lower_size) + " bytes)");
  }
  if (DataAreaPastEnd(sb.data_offset, h.units, h.grain, lower_size)) {
    return TruncatedBelow(name, *lower, DataAreaEnd(sb.data_offset, h.units, h.grain));
  }
  if (!extra) return extra.error();
  if (o.grain_given && h.grain != o.grain) {
    return FormattedWith(f.name, "grain", std::to_string(h.grain), std::to_string(o.grain));
  }
  if (o.size_given && o.size != h.size) {
    return FormattedWith(f.name, "size", std::to_string(h.size), std::to_string(o.size));
  }
  const uint64_t data_offset = sb.data_offset;
  const uint32_t stored_version = h.version;
  Superblock current = sb;
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<MetaStore> store,
                          MetaStore::Attach(*lower, std::move(sb), read_only, name));
  DevicePtr dev(make(std::move(lower), h, std::move(store), data_offset, read_only));
  auto& g = static_cast<GrainDevice&>(*dev);
  VSTACK_RETURN_IF_ERROR(g.Load(/*blank=*/false));
  if (stored_version < f.version && !read_only) {
    // Migrate: what the older version kept and this one derives is ignored; from now on the
    // superblock says this version, so an older vstack refuses the image instead of misreading.
    std::vector<uint8_t> payload = current.payload;
    StoreLE32(payload.data(), f.version);
    auto lock = g.store_->LockCommits();
    VSTACK_RETURN_IF_ERROR(g.store_->RewritePayload(std::move(payload)));
  }
  return dev;
}

Status GrainDevice::Load(bool blank) {
  if (!blank) {
    const uint64_t grains = map_.grains(), units = map_.units();
    Status s = store_->Load([&](uint32_t table, uint64_t index, const uint8_t* e) -> Status {
      if (table == kUnitTable) return LoadUnitRecord(index, e);
      const uint64_t entry = format_.entry_bytes == 8 ? LoadLE64(e) : LoadLE32(e);
      std::string bad = index >= grains ? "out of range" : BadEntry(entry);
      if (bad.empty() && UnitMap::HasUnit(entry) && UnitMap::UnitOf(entry) >= units) {
        bad = "points to unit " + std::to_string(UnitMap::UnitOf(entry)) + ", beyond the " +
              std::to_string(units) + " units";
      }
      if (!bad.empty()) {
        return MakeError(Errc::kCorruption, format_.name + std::string(": map entry of virtual grain ") +
                                                std::to_string(index) + " " + bad);
      }
      map_.Load(index, entry);
      return OkStatus();
    });
    if (!s) return s;
  }
  map_.FinishLoad();
  FinishLoad();
  return OkStatus();
}

Result<std::unique_ptr<IoQueue>> GrainDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return std::unique_ptr<IoQueue>(std::make_unique<GrainQueue>(*this, std::move(lower)));
}

// ---------------------------------------------------------------------------------------------
// Commits

Status GrainDevice::Commit(CommitKind kind) {
  if (!store_ || store_->read_only()) return OkStatus();
  internal::PhaseScope metadata(*this, CpuPhase::kMetadata);
  auto lock = store_->LockCommits();
  const bool discards = lower_device().Has(kCapDiscard);
  const bool discard_all = kind == CommitKind::kMakeRoom || kind == CommitKind::kClose;
  std::vector<uint64_t> units;
  if (discards && discard_all) {
    // First what is free already: the commit's own journal write may need that room below.
    map_.TakeStale(&units);
    if (!units.empty()) DiscardUnits(units);
  }
  UnitMap::Capture c = map_.TakeCapture();
  MetaBatch& batch = batch_;  // reused: its capacity stays
  batch.records.clear();
  batch.group_ends.clear();
  uint8_t rec[64] = {};
  size_t n = 0;
  auto add = [&](uint32_t table, uint64_t index) {
    store_->Record(&batch, table, index, rec);
    if (++n % kRecordsPerGroup == 0) batch.group_ends.push_back(batch.records.size());
  };
  if (format_.unit_records) {
    for (uint64_t u : c.stored) {
      std::fill(std::begin(rec), std::end(rec), 0);
      UnitRecord(u, rec);
      add(kUnitTable, u);
    }
  }
  for (const auto& [v, e] : c.grains) {
    StoreLE64(rec, e);  // little-endian: the low 4 bytes are a 4-byte entry
    add(kMapTable, v);
  }
  Status s = store_->Commit(&batch);
  if (s) {
    std::vector<uint64_t> freed;
    map_.Reclaim(c,
                 [this](std::span<const uint64_t> units,
                        const std::function<bool(uint64_t)>& free_if) { Reclaim(units, free_if); },
                 &freed);
  } else {
    map_.Restore(std::move(c));  // the next commit journals them (what was journaled stays)
  }
  units.clear();
  map_.TakeAged(discards ? &units : nullptr, kKeepStaleBytes / grain(),
                std::max<uint64_t>(1, kMinDiscardRunBytes / grain()));
  if (discards && discard_all) map_.TakeStale(&units);
  if (!units.empty()) DiscardUnits(units);
  CountShared(kCommits);
  const uint64_t waited_us = store_->counters().durable_wait_ns / 1000;
  CountShared(kDurableWaitUs, waited_us - durable_wait_counted_us_);
  durable_wait_counted_us_ = waited_us;
  return s;
}

void GrainDevice::DiscardUnits(std::vector<uint64_t>& units) {
  std::sort(units.begin(), units.end());
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  for (size_t i = 0; i < units.size();) {
    size_t j = i + 1;
    while (j < units.size() && units[j] == units[j - 1] + 1) ++j;
    runs.emplace_back(data_offset() + units[i] * grain(), (j - i) * uint64_t{grain()});
    i = j;
  }
  const uint64_t bytes = store_->Discard(runs);
  map_.FinishDiscard(units);
  CountShared(kDiscards, runs.size());
  CountShared(kDiscardedBytes, bytes);
}

Status GrainDevice::CloseLayer() {
  if (!store_) return OkStatus();
  Status s = Commit(CommitKind::kClose);
  auto lock = store_->LockCommits();
  Status c = store_->Close();
  return s ? c : s;
}

// ---------------------------------------------------------------------------------------------
// Reporting and checking

Status GrainDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  const uint64_t g = grain();
  for (uint64_t pos = offset; pos < offset + length;) {
    const uint64_t written = map_.NextWritten(pos / g);
    if (written > pos / g) {  // map blocks never written: a hole up to the next written one
      const uint64_t end = std::min<uint64_t>(written * g, offset + length);
      AppendExtent(out, pos, end - pos, kExtentHole | kExtentZero);
      pos = end;
      continue;
    }
    const uint64_t e = map_.Get(pos / g);
    const uint64_t end = std::min<uint64_t>((pos / g + 1) * g, offset + length);
    const uint32_t flags = e == UnitMap::kUnmapped ? kExtentHole | kExtentZero
                           : e == UnitMap::kZero   ? uint32_t{kExtentZero}
                                                   : 0u;
    AppendExtent(out, pos, end - pos, flags);
    pos = end;
  }
  return OkStatus();
}

SpaceUsage GrainDevice::BaseSpace() const {
  const UnitMap::Usage u = usage();
  const LayerStats st = Counts();  // no histogram merge
  SpaceUsage s;
  s.grain_bytes = grain();
  s.logical_bytes_written = st.of(::vstack::Op::kWrite).bytes + st.of(::vstack::Op::kWriteZeroes).bytes;
  s.logical_bytes_live = u.live * grain();
  s.zero_grains = u.zeros;
  s.physical_bytes_used = u.allocated * grain();
  s.metadata_bytes = data_offset();
  s.data_offset = data_offset();
  return s;
}

void GrainDevice::BaseProperties(PropertyList& out) const {
  out.push_back({"grain", uint64_t{grain()}, "bytes"});
  out.push_back({"virtual_grains", map_.grains(), ""});
  if (!in_place()) out.push_back({"units", map_.units(), ""});
  out.push_back({"data_offset", data_offset(), "bytes"});
  out.push_back({"map_memory_bytes", map_.memory_bytes(), "bytes"});
  if (!store_) return;
  auto lock = store_->LockCommits();
  const MetaStore::Counters c = store_->counters();
  out.push_back({"journal_bytes", store_->superblock().journal_bytes, "bytes"});
  out.push_back({"journal_used_bytes", store_->journal_used(), "bytes"});
  out.push_back({"replayed_transactions", c.replayed_transactions, ""});
  out.push_back({"checkpoints", c.checkpoints, ""});
}

Status GrainDevice::Check(CheckMode mode, CheckResult* out) {
  VSTACK_RETURN_IF_ERROR(RefuseCheckIfBlank());
  const uint64_t repaired_before = out->repaired;
  if (store_) {
    CheckSuperblockSlots(
        store_->superblock(), format_.name, mode != CheckMode::kReadOnly && !store_->read_only(),
        [&]() -> Status {
          auto lock = store_->LockCommits();
          return store_->RewritePayload(store_->superblock().payload);
        },
        out);
  }
  map_.Check(mode, std::string(format_.name) + ": unit", out);
  CheckMore(mode, out);
  Status s = Scrub(mode, out);
  if (s && out->repaired > repaired_before && !read_only()) {
    s = Commit(CommitKind::kFlush);
  }
  if (store_) {
    auto lock = store_->LockCommits();
    store_->ReleaseQueue();  // so that the device below can be checked and repaired next
  }
  return s;
}

Status GrainDevice::Scrub(CheckMode mode, CheckResult* out) {
  constexpr uint64_t kChunk = 1 << 20;
  SyncIo io(lower_device());
  const uint32_t block = lower_device().geometry().logical_block;
  AlignedBuffer buf(kChunk + 2 * grain(),
                    std::max<uint64_t>(4096, lower_device().geometry().mem_alignment));
  std::vector<bool> seen(map_.units());
  std::vector<std::pair<uint64_t, uint64_t>> members;  // (grain, entry) of the run
  uint64_t lo = 0, hi = 0, listed = 0, more_bad = 0, more_repaired = 0;
  auto flush = [&]() -> Status {
    if (members.empty()) return OkStatus();
    if (out->Stopped()) {
      return MakeError(Errc::kCancelled, std::string(format_.name) + ": check: interrupted at " +
                                             "offset " + std::to_string(lo) +
                                             " of the device below");
    }
    if (std::error_code ec = io.Read(lo, buf.span().first(hi - lo))) {
      return MakeError(ec, std::string(format_.name) + ": check: cannot read offset " +
                               std::to_string(lo) + ": " + ec.message());
    }
    for (const auto& [v, e] : members) {
      const Location l = in_place() ? Location{v, 0, 0} : Locate(e);
      const uint64_t at = data_offset() + l.unit * grain() + l.offset;
      ScrubFinding f = ScrubGrain(v, e, buf.data() + (at - lo), l.raw() ? grain() : l.length, mode);
      if (f.problem.empty()) continue;
      if (listed++ < kMaxScrubMessages) {
        out->messages.push_back((f.repaired ? "Repaired: " : "ERROR ") + f.problem);
      } else {
        ++(f.repaired ? more_repaired : more_bad);
      }
      ++(f.repaired ? out->repaired : out->corruptions);
    }
    members.clear();
    return OkStatus();
  };
  // An in-place layer checks every grain (a grain never written must read as zeros); the others
  // only the grains of map blocks that were ever written.
  auto next = [&](uint64_t v) { return in_place() ? v : map_.NextWritten(v); };
  for (uint64_t v = next(0); v < map_.grains(); v = next(v + 1)) {
    const uint64_t e = map_.Get(v);
    if (!in_place() && !UnitMap::HasUnit(e)) continue;
    const Location l = in_place() ? Location{v, 0, 0} : Locate(e);
    if (!in_place() && l.raw()) {
      if (seen[l.unit]) continue;  // shared (dedup): once
      seen[l.unit] = true;
    }
    const uint64_t at = data_offset() + l.unit * grain() + l.offset;
    const uint64_t a = at / block * block;
    const uint64_t b = (at + (l.raw() ? grain() : l.length) + block - 1) / block * block;
    if (members.empty() || a < lo || a > hi || b - lo > kChunk) {
      VSTACK_RETURN_IF_ERROR(flush());
      lo = a;
      hi = b;
    }
    hi = std::max(hi, b);
    members.emplace_back(v, e);
  }
  VSTACK_RETURN_IF_ERROR(flush());
  const std::string name = format_.name;
  if (more_bad > 0) {
    out->messages.push_back("ERROR " + name + ": " + std::to_string(more_bad) +
                            " more stored grains fail their check (not listed)");
  }
  if (more_repaired > 0) {
    out->messages.push_back("Repaired: " + name + ": " + std::to_string(more_repaired) +
                            " more stored grains (not listed)");
  }
  return OkStatus();
}

}  // namespace vstack
