// The dedup device: options, formatting and opening, commits, accounting, check. The data path
// is in dedup_queue.cc, the state in dedup_engine.cc.
#include "blockdev/dedup/dedup_device.h"

#include <cassert>
#include <cstring>

#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/size.h"

namespace vstack {
namespace {

constexpr char kMagic[] = "VSDEDUP1";
constexpr uint32_t kPayloadVersion = 1;

// ---------------------------------------------------------------------------------------------
// Opening

struct Layout {
  Superblock sb;
  uint64_t physical_grains = 0;
};

std::vector<uint8_t> EncodePayload(uint32_t grain, uint64_t size, uint64_t pgrains) {
  ByteWriter w;
  w.U32(kPayloadVersion);
  w.U32(grain);
  w.U64(size);
  w.U64(pgrains);
  return std::move(w.bytes());
}

uint64_t JournalBytes(uint64_t lower_size) {
  return std::clamp<uint64_t>(lower_size / 256, 1 << 20, 64 << 20) / kMetaPageSize * kMetaPageSize;
}

// Fits as many physical grains as the device below holds after the metadata they need.
Result<Layout> PlanLayout(uint32_t grain, uint64_t size, uint64_t lower_size) {
  const uint64_t vgrains = size / grain;
  uint64_t pgrains = std::min<uint64_t>(lower_size / grain, DedupEngine::kMaxPhysicalGrains);
  for (;;) {
    Superblock sb = MetaStore::Plan(
        kMagic,
        {TableDesc{0, vgrains, DedupEngine::kMapEntryBytes},
         TableDesc{0, pgrains, DedupEngine::kGrainEntryBytes}},
        JournalBytes(lower_size), EncodePayload(grain, size, pgrains));
    const uint64_t need = sb.data_offset + pgrains * grain;
    if (need <= lower_size && pgrains > 0) return Layout{std::move(sb), pgrains};
    const uint64_t excess = need > lower_size ? (need - lower_size + grain - 1) / grain : 1;
    if (excess >= pgrains) {
      return MakeError(Errc::kNoSpace, "dedup: the device below (" + FormatSize(lower_size) +
                                           ") is too small for the metadata of a " +
                                           FormatSize(size) + " dedup device");
    }
    pgrains -= excess;
  }
}

}  // namespace

uint64_t DedupMetadataBytes(uint64_t mapped_grains, uint64_t unique_grains) {
  return TableDesc{0, mapped_grains, DedupEngine::kMapEntryBytes}.bytes() +
         TableDesc{0, unique_grains, DedupEngine::kGrainEntryBytes}.bytes();
}

Result<DedupOptions> ParseDedupOptions(const OptionValues& values, uint64_t lower_size) {
  DedupOptions o;
  VSTACK_ASSIGN_OR_RETURN(uint64_t grain, values.Size("grain"));
  if (grain < 4096 || grain > 65536 || (grain & (grain - 1))) {
    return MakeError(Errc::kInvalidArgument, "dedup: option 'grain': " + std::to_string(grain) +
                                                 " is not a power of two from 4K to 64K");
  }
  o.grain = static_cast<uint32_t>(grain);
  o.grain_given = values.Has("grain");
  VSTACK_ASSIGN_OR_RETURN(o.verify, values.Bool("verify"));
  o.size_given = values.Has("size");
  if (o.size_given) {
    VSTACK_ASSIGN_OR_RETURN(o.size, values.Size("size"));
    if (o.size == 0 || o.size % o.grain) {
      return MakeError(Errc::kInvalidArgument, "dedup: option 'size': " + std::to_string(o.size) +
                                                   " is not a positive multiple of the grain (" +
                                                   std::to_string(o.grain) + ")");
    }
  } else {
    o.size = lower_size / o.grain * o.grain;
  }
  return o;
}

DedupDevice::DedupDevice(DevicePtr lower, uint32_t grain, bool verify, uint64_t size,
                         uint64_t physical_grains, std::unique_ptr<MetaStore> store,
                         uint64_t data_offset, bool read_only)
    : Layer("dedup", std::move(lower)),
      grain_(grain),
      verify_(verify),
      data_offset_(data_offset),
      metadata_bytes_(data_offset),
      store_(std::move(store)),
      engine_(std::make_unique<DedupEngine>(size / grain, physical_grains, store_.get())) {
  Geometry& g = mutable_geometry();
  g.size_bytes = size;
  g.physical_block = std::max<uint32_t>(g.physical_block, grain);
  g.optimal_transfer = grain;
  g.max_transfer = std::max<uint64_t>(1 << 20, grain);
  const Capabilities below = lower_device().capabilities();
  Capabilities caps = kCapRead | kCapFlush | kCapExtents | (below & (kCapPersistent | kCapThreadSafe));
  if (!read_only && (below & kCapWrite)) {
    caps |= kCapWrite | kCapDiscard | kCapWriteZeroes | kCapDiscardZeroes | kCapFastZeroes;
  }
  set_capabilities(caps);
  if (store_) commit_threshold_ = store_->superblock().journal_bytes / 4;
  DeclareCounters({"dedup_hits", "unique_writes", "zero_grains", "rmw_reads", "verify_reads",
                   "collisions", "retries", "commits"});
}

Result<DevicePtr> DedupDevice::Open(DevicePtr lower, const DedupOptions& o, bool read_only) {
  const std::string who = "dedup";
  if (!lower->Has(kCapThreadSafe)) {
    return MakeError(Errc::kNotSupported, "dedup: the device below must support several queues");
  }
  read_only = read_only || lower->read_only();
  const uint64_t lower_size = lower->geometry().size_bytes;
  Result<Superblock> sb = [&] {
    SyncIo io(*lower);
    return ReadSuperblock(io, kMagic, who);
  }();
  if (!sb && sb.error().code != make_error_code(Errc::kNotFound)) return std::move(sb).error();
  if (!sb) {
    // A blank device: format it (or, read-only, present it empty).
    VSTACK_ASSIGN_OR_RETURN(Layout layout, PlanLayout(o.grain, o.size, lower_size));
    std::unique_ptr<MetaStore> store;
    if (!read_only) {
      VSTACK_ASSIGN_OR_RETURN(store, MetaStore::Format(*lower, layout.sb, who));
    }
    auto* dev = new DedupDevice(std::move(lower), o.grain, o.verify, o.size,
                                layout.physical_grains, std::move(store), layout.sb.data_offset,
                                read_only);
    DevicePtr owned(dev);
    dev->engine_->FinishLoad();
    return owned;
  }
  ByteReader r(sb->payload);
  const uint32_t version = r.U32();
  const uint32_t grain = r.U32();
  const uint64_t size = r.U64();
  const uint64_t pgrains = r.U64();
  const std::string where = "dedup: superblock: ";
  if (!r.ok() || version != kPayloadVersion) {
    return MakeError(Errc::kCorruption, where + "unknown or truncated dedup fields (version " +
                                            std::to_string(version) + ")");
  }
  if (grain < 4096 || grain > 65536 || (grain & (grain - 1)) || size == 0 || size % grain ||
      pgrains == 0 || pgrains > DedupEngine::kMaxPhysicalGrains || sb->tables.size() != 2 ||
      sb->tables[0].entries != size / grain || sb->tables[1].entries != pgrains ||
      sb->tables[0].entry_size != DedupEngine::kMapEntryBytes ||
      sb->tables[1].entry_size != DedupEngine::kGrainEntryBytes ||
      sb->data_offset + pgrains * grain > lower_size) {
    return MakeError(Errc::kCorruption,
                     where + "inconsistent geometry (grain " + std::to_string(grain) + ", size " +
                         std::to_string(size) + ", " + std::to_string(pgrains) +
                         " physical grains, device below " + std::to_string(lower_size) + " bytes)");
  }
  if (o.grain_given && grain != o.grain) {
    return MakeError(Errc::kInvalidArgument, "dedup: option 'grain': the device was formatted with grain=" +
                                                 std::to_string(grain) + ", not " +
                                                 std::to_string(o.grain));
  }
  if (o.size_given && o.size != size) {
    return MakeError(Errc::kInvalidArgument, "dedup: option 'size': the device was formatted with size=" +
                                                 std::to_string(size) + ", not " +
                                                 std::to_string(o.size));
  }
  const uint64_t data_offset = sb->data_offset;
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<MetaStore> store,
                          MetaStore::Attach(*lower, std::move(*sb), read_only, who));
  MetaStore* s = store.get();
  auto* dev = new DedupDevice(std::move(lower), grain, o.verify, size, pgrains, std::move(store),
                              data_offset, read_only);
  DevicePtr owned(dev);
  DedupEngine& eng = *dev->engine_;
  VSTACK_RETURN_IF_ERROR(LoadEngine(*s, eng, "dedup"));
  return owned;
}

Result<std::unique_ptr<IoQueue>> DedupDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return NewDedupQueue(*this, std::move(lower));
}

Status DedupDevice::Commit() {
  if (!store_ || store_->read_only()) return OkStatus();
  Status s = CommitEngine(*store_, *engine_);
  CountCommit();
  return s;
}

Status DedupDevice::CloseLayer() {
  if (!store_) return OkStatus();
  if (!store_->read_only()) CountShared(kCommits);
  return CloseEngine(*store_, *engine_);
}

// ---------------------------------------------------------------------------------------------
// Reporting

std::string DedupDevice::Describe() const {
  return "dedup grain=" + FormatSize(grain_) + (verify_ ? " verify=on" : "") + ", " +
         std::to_string(engine_->physical_grains()) + " physical grains";
}

std::optional<SpaceUsage> DedupDevice::Space() const {
  const DedupEngine::Usage u = engine_->usage();
  const LayerStats st = Stats();
  SpaceUsage s;
  s.grain_bytes = grain_;
  s.logical_bytes_written = st.of(Op::kWrite).bytes + st.of(Op::kWriteZeroes).bytes;
  s.logical_bytes_live = u.live_grains * grain_;
  s.zero_grains = u.zero_grains;
  s.unique_grains = u.unique_grains;
  s.compressed_bytes = u.unique_grains * grain_;
  s.stored_bytes = u.unique_grains * grain_;
  s.physical_bytes_used = u.allocated_grains * grain_;
  s.metadata_bytes = metadata_bytes_;
  s.data_offset = data_offset_;
  return s;
}

void DedupDevice::Properties(PropertyList& out) const {
  const DedupEngine::Usage u = engine_->usage();
  out.push_back({"grain", uint64_t{grain_}, "bytes"});
  out.push_back({"verify", verify_, ""});
  out.push_back({"virtual_grains", engine_->virtual_grains(), ""});
  out.push_back({"physical_grains", engine_->physical_grains(), ""});
  out.push_back({"data_offset", data_offset_, "bytes"});
  out.push_back({"index_entries", u.index_entries, ""});
  out.push_back({"index_memory_bytes", u.index_memory_bytes, "bytes"});
  out.push_back({"index_bytes_per_unique_grain",
                 u.unique_grains ? double(u.index_memory_bytes) / double(u.unique_grains) : 0.0,
                 "bytes"});
  out.push_back({"map_memory_bytes", u.map_memory_bytes, "bytes"});
  out.push_back({"dedup_ratio",
                 u.unique_grains ? double(u.live_grains - u.zero_grains) / double(u.unique_grains)
                                 : 0.0,
                 ""});
  out.push_back({"hash_collisions", u.collisions, ""});
  if (store_) {
    auto lock = store_->LockCommits();
    const MetaStore::Counters c = store_->counters();
    out.push_back({"journal_bytes", store_->superblock().journal_bytes, "bytes"});
    out.push_back({"journal_used_bytes", store_->journal_used(), "bytes"});
    out.push_back({"replayed_transactions", c.replayed_transactions, ""});
    out.push_back({"checkpoints", c.checkpoints, ""});
  }
  if (auto s = Space()) AppendSpaceProperties(*s, out);
}

Status DedupDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  constexpr uint64_t kBatch = 4096;  // map entries looked up per lock
  std::vector<uint32_t> entries;
  uint64_t batch_first = 0;
  for (uint64_t pos = offset; pos < offset + length;) {
    const uint64_t v = pos / grain_;
    if (entries.empty() || v >= batch_first + entries.size()) {
      entries.clear();
      batch_first = v;
      const uint64_t last = (offset + length - 1) / grain_;
      engine_->MapEntries(v, std::min<uint64_t>(kBatch, last - v + 1), &entries);
    }
    const uint64_t end = std::min<uint64_t>((v + 1) * grain_, offset + length);
    const uint32_t e = entries[v - batch_first];
    uint32_t flags = 0;
    if (e == DedupEngine::kUnmapped) flags = kExtentHole | kExtentZero;
    if (e == DedupEngine::kZero) flags = kExtentZero;
    AppendExtent(out, pos, end - pos, flags);
    pos = end;
  }
  return OkStatus();
}

Status DedupDevice::Check(CheckMode mode, CheckResult* out) {
  const uint64_t repaired_before = out->repaired;
  engine_->Check(mode, out);
  // Every used grain's content against its fingerprint.
  SyncIo io(lower_device());
  AlignedBuffer buf(grain_, std::max<uint64_t>(4096, lower_device().geometry().mem_alignment));
  for (const DedupEngine::UsedGrain& g : engine_->UsedGrains()) {
    const uint64_t offset = data_offset_ + uint64_t{g.pgrain} * grain_;
    if (std::error_code ec = io.Read(offset, buf.span())) {
      return MakeError(ec, "dedup: check: cannot read physical grain " + std::to_string(g.pgrain) +
                               " at offset " + std::to_string(offset) + ": " + ec.message());
    }
    if (!(FingerprintOf(buf.data(), grain_) == g.fp)) {
      out->Corruption("dedup: physical grain " + std::to_string(g.pgrain) + " at offset " +
                      std::to_string(offset) +
                      " does not match its fingerprint (data of virtual offset " +
                      std::to_string(g.some_vgrain * grain_) + " and any duplicates)");
    }
  }
  if (out->repaired > repaired_before && store_ && !store_->read_only()) return Commit();
  return OkStatus();
}

namespace {

ComponentInfo DedupComponent() {
  ComponentInfo c;
  c.name = "dedup";
  c.kind = ComponentKind::kLayer;
  c.summary = "inline deduplication of fixed-size grains (XXH3-128, zero elimination, refcounts)";
  c.options = {
      {"grain", "deduplication grain: a power of two from 4K to 64K", "4K"},
      {"verify", "compare bytes before sharing a grain (safe against hash collisions)", "off"},
      {"size", "virtual size (thin; default: the size of the device below)", ""},
  };
  c.open_layer = [](DevicePtr lower, const OptionValues& values,
                    const OpenOptions& open) -> Result<DevicePtr> {
    VSTACK_ASSIGN_OR_RETURN(DedupOptions o, ParseDedupOptions(values, lower->geometry().size_bytes));
    return DedupDevice::Open(std::move(lower), o, open.read_only);
  };
  return c;
}

}  // namespace

VSTACK_REGISTER_COMPONENT(dedup, DedupComponent());

}  // namespace vstack
