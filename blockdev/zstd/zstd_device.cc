// The zstd device: options, formatting and opening, accounting, check. The data path is in
// zstd_queue.cc, the state in zstd_engine.cc.
#include "blockdev/zstd/zstd_device.h"

#include <cstring>

#include "blockdev/zstd/grain_codec.h"
#include "lib/aligned_buffer.h"
#include "lib/size.h"
#include "lib/sync_io.h"

namespace vstack {
namespace {

constexpr char kMagic[] = "VSZSTD01";
constexpr uint32_t kPayloadVersion = 1;

std::vector<uint8_t> EncodePayload(uint32_t grain, const SizeRule& rule, uint64_t size,
                                   uint64_t bins) {
  ByteWriter w;
  w.U32(kPayloadVersion);
  w.U32(grain);
  w.U8(rule.kind);
  w.U32(rule.min_saving_bp);
  w.U64(size);
  w.U64(bins);
  return std::move(w.bytes());
}

uint64_t JournalBytes(uint64_t lower_size) {
  return std::clamp<uint64_t>(lower_size / 256, 1 << 20, 64 << 20) / kMetaPageSize * kMetaPageSize;
}

struct Layout {
  Superblock sb;
  uint64_t bins = 0;
};

// Fits as many bins as the device below holds after the metadata they need.
Result<Layout> PlanLayout(uint32_t grain, const SizeRule& rule, uint64_t size,
                          uint64_t lower_size) {
  uint64_t bins = std::min<uint64_t>(lower_size / grain, ZstdEngine::kMaxBins);
  for (;;) {
    Superblock sb = MetaStore::Plan(
        kMagic,
        {TableDesc{0, size / grain, ZstdEngine::kMapEntryBytes},
         TableDesc{0, bins, ZstdEngine::kBinEntryBytes}},
        JournalBytes(lower_size), EncodePayload(grain, rule, size, bins));
    const uint64_t need = sb.data_offset + bins * grain;
    if (need <= lower_size && bins > 0) return Layout{std::move(sb), bins};
    const uint64_t excess = need > lower_size ? (need - lower_size + grain - 1) / grain : 1;
    if (excess >= bins) {
      return MakeError(Errc::kNoSpace, "zstd: the device below (" + FormatSize(lower_size) +
                                           ") is too small for the metadata of a " +
                                           FormatSize(size) + " zstd device");
    }
    bins -= excess;
  }
}

}  // namespace

uint64_t ZstdMetadataBytes(uint64_t stored_grains, uint64_t bins) {
  return TableDesc{0, stored_grains, ZstdEngine::kMapEntryBytes}.bytes() +
         TableDesc{0, bins, ZstdEngine::kBinEntryBytes}.bytes();
}

Result<ZstdOptions> ParseZstdOptions(const OptionValues& values, uint64_t lower_size) {
  ZstdOptions o;
  VSTACK_ASSIGN_OR_RETURN(int64_t level, values.Int("level", MinZstdLevel(), MaxZstdLevel()));
  o.level = static_cast<int>(level);
  VSTACK_ASSIGN_OR_RETURN(uint64_t grain, values.Size("grain"));
  if (grain < 4096 || grain > 65536 || (grain & (grain - 1))) {
    return MakeError(Errc::kInvalidArgument, "zstd: option 'grain': " + std::to_string(grain) +
                                                 " is not a power of two from 4K to 64K");
  }
  o.grain = static_cast<uint32_t>(grain);
  o.grain_given = values.Has("grain");
  o.rule_given = values.Has("rule");
  Result<SizeRule> rule = ParseSizeRule(values.Get("rule"));
  if (!rule) return Annotate(std::move(rule).error(), "zstd: option 'rule'");
  o.rule = *rule;
  o.size_given = values.Has("size");
  if (o.size_given) {
    VSTACK_ASSIGN_OR_RETURN(o.size, values.Size("size"));
    if (o.size == 0 || o.size % o.grain) {
      return MakeError(Errc::kInvalidArgument, "zstd: option 'size': " + std::to_string(o.size) +
                                                   " is not a positive multiple of the grain (" +
                                                   std::to_string(o.grain) + ")");
    }
  } else {
    o.size = lower_size / o.grain * o.grain;
  }
  return o;
}

ZstdDevice::ZstdDevice(DevicePtr lower, const ZstdOptions& o, uint64_t bins,
                       std::unique_ptr<MetaStore> store, uint64_t data_offset, bool read_only)
    : Layer("zstd", std::move(lower)),
      level_(o.level),
      grain_(o.grain),
      data_offset_(data_offset),
      store_(std::move(store)),
      engine_(std::make_unique<ZstdEngine>(o.size / o.grain, bins, o.grain, o.rule, store_.get())) {
  Geometry& g = mutable_geometry();
  g.size_bytes = o.size;
  g.physical_block = std::max<uint32_t>(g.physical_block, grain_);
  g.optimal_transfer = grain_;
  g.max_transfer = std::max<uint64_t>(1 << 20, grain_);
  const Capabilities below = lower_device().capabilities();
  Capabilities caps = kCapRead | kCapFlush | kCapExtents | (below & (kCapPersistent | kCapThreadSafe));
  if (!read_only && (below & kCapWrite)) {
    caps |= kCapWrite | kCapDiscard | kCapWriteZeroes | kCapDiscardZeroes | kCapFastZeroes;
  }
  set_capabilities(caps);
  if (store_) commit_threshold_ = store_->superblock().journal_bytes / 4;
  DeclareCounters({"compressed_grains", "raw_grains", "zero_grains", "rmw_reads",
                   "decompress_errors", "retries", "commits"});
}

Result<DevicePtr> ZstdDevice::Open(DevicePtr lower, const ZstdOptions& opts, bool read_only) {
  const std::string who = "zstd";
  if (!lower->Has(kCapThreadSafe)) {
    return MakeError(Errc::kNotSupported, "zstd: the device below must support several queues");
  }
  read_only = read_only || lower->read_only();
  const uint64_t lower_size = lower->geometry().size_bytes;
  Result<Superblock> sb = [&] {
    SyncIo io(*lower);
    return ReadSuperblock(io, kMagic, who);
  }();
  if (!sb && sb.error().code != make_error_code(Errc::kNotFound)) return std::move(sb).error();
  if (!sb) {
    VSTACK_ASSIGN_OR_RETURN(Layout layout, PlanLayout(opts.grain, opts.rule, opts.size, lower_size));
    std::unique_ptr<MetaStore> store;
    if (!read_only) {
      VSTACK_ASSIGN_OR_RETURN(store, MetaStore::Format(*lower, layout.sb, who));
    }
    auto* dev = new ZstdDevice(std::move(lower), opts, layout.bins, std::move(store),
                               layout.sb.data_offset, read_only);
    DevicePtr owned(dev);
    dev->engine_->FinishLoad();
    return owned;
  }
  ByteReader r(sb->payload);
  const uint32_t version = r.U32();
  const uint32_t grain = r.U32();
  SizeRule rule;
  rule.kind = static_cast<SizeRule::Kind>(r.U8());
  rule.min_saving_bp = r.U32();
  const uint64_t size = r.U64();
  const uint64_t bins = r.U64();
  const std::string where = "zstd: superblock: ";
  if (!r.ok() || version != kPayloadVersion) {
    return MakeError(Errc::kCorruption, where + "unknown or truncated zstd fields (version " +
                                            std::to_string(version) + ")");
  }
  if (rule.kind > SizeRule::kMinSaving || rule.min_saving_bp >= 10000) {
    return MakeError(Errc::kCorruption, where + "unknown stored-size rule " +
                                            std::to_string(int{rule.kind}));
  }
  if (grain < 4096 || grain > 65536 || (grain & (grain - 1)) || size == 0 || size % grain ||
      bins == 0 || bins > ZstdEngine::kMaxBins || sb->tables.size() != 2 ||
      sb->tables[0].entries != size / grain || sb->tables[1].entries != bins ||
      sb->tables[0].entry_size != ZstdEngine::kMapEntryBytes ||
      sb->tables[1].entry_size != ZstdEngine::kBinEntryBytes ||
      sb->data_offset + bins * grain > lower_size) {
    return MakeError(Errc::kCorruption,
                     where + "inconsistent geometry (grain " + std::to_string(grain) + ", size " +
                         std::to_string(size) + ", " + std::to_string(bins) +
                         " bins, device below " + std::to_string(lower_size) + " bytes)");
  }
  auto mismatch = [](const std::string& option, const std::string& stored, const std::string& given) {
    return MakeError(Errc::kInvalidArgument, "zstd: option '" + option +
                                                 "': the device was formatted with " + option +
                                                 "=" + stored + ", not " + given);
  };
  if (opts.grain_given && grain != opts.grain) {
    return mismatch("grain", std::to_string(grain), std::to_string(opts.grain));
  }
  if (opts.size_given && opts.size != size) {
    return mismatch("size", std::to_string(size), std::to_string(opts.size));
  }
  if (opts.rule_given && !(opts.rule == rule)) {
    return mismatch("rule", FormatSizeRule(rule), FormatSizeRule(opts.rule));
  }
  ZstdOptions o = opts;
  o.grain = grain;
  o.size = size;
  o.rule = rule;
  const uint64_t data_offset = sb->data_offset;
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<MetaStore> store,
                          MetaStore::Attach(*lower, std::move(*sb), read_only, who));
  MetaStore* s = store.get();
  auto* dev = new ZstdDevice(std::move(lower), o, bins, std::move(store), data_offset, read_only);
  DevicePtr owned(dev);
  ZstdEngine& eng = *dev->engine_;
  VSTACK_RETURN_IF_ERROR(LoadEngine(*s, eng, "zstd"));
  return owned;
}

Result<std::unique_ptr<IoQueue>> ZstdDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return NewZstdQueue(*this, std::move(lower));
}

Status ZstdDevice::Commit() {
  if (!store_ || store_->read_only()) return OkStatus();
  Status s = CommitEngine(*store_, *engine_);
  CountShared(kCommits);
  return s;
}

Status ZstdDevice::CloseLayer() {
  if (!store_) return OkStatus();
  if (!store_->read_only()) CountShared(kCommits);
  return CloseEngine(*store_, *engine_);
}

// ---------------------------------------------------------------------------------------------
// Reporting

std::string ZstdDevice::Describe() const {
  return "zstd level=" + std::to_string(level_) + " grain=" + FormatSize(grain_) +
         " rule=" + FormatSizeRule(rule()) + ", " + std::to_string(engine_->bins()) + " bins";
}

namespace {

SpaceUsage ToSpace(const ZstdEngine::Usage& u, uint32_t grain) {
  SpaceUsage s;
  s.grain_bytes = grain;
  s.logical_bytes_live = u.live_grains * grain;
  s.zero_grains = u.zero_grains;
  s.unique_grains = u.stored_grains;
  s.compressed_bytes = u.compressed_bytes;
  s.stored_bytes = u.stored_bytes;
  s.physical_bytes_used = u.allocated_bins * grain;
  return s;
}

}  // namespace

std::optional<SpaceUsage> ZstdDevice::Space() const {
  SpaceUsage s = ToSpace(engine_->usage(), grain_);
  const LayerStats st = Stats();
  s.logical_bytes_written = st.of(Op::kWrite).bytes + st.of(Op::kWriteZeroes).bytes;
  s.metadata_bytes = data_offset_;
  s.data_offset = data_offset_;
  return s;
}

std::optional<SpaceUsage> ZstdDevice::SpaceOf(uint64_t offset, uint64_t length) const {
  return ToSpace(engine_->UsageOf(offset / grain_, length / grain_), grain_);
}

void ZstdDevice::Properties(PropertyList& out) const {
  const ZstdEngine::Usage u = engine_->usage();
  out.push_back({"level", int64_t{level_}, ""});
  out.push_back({"grain", uint64_t{grain_}, "bytes"});
  out.push_back({"rule", FormatSizeRule(rule()), ""});
  out.push_back({"virtual_grains", engine_->virtual_grains(), ""});
  out.push_back({"bins", engine_->bins(), ""});
  out.push_back({"data_offset", data_offset_, "bytes"});
  out.push_back({"raw_grains", u.raw_grains, ""});
  out.push_back({"compression_ratio",
                 u.stored_bytes ? double(u.stored_grains * grain_) / double(u.stored_bytes) : 0.0,
                 ""});
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

Status ZstdDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  constexpr uint64_t kBatch = 4096;  // map entries looked up per lock
  std::vector<uint64_t> entries;
  uint64_t batch_first = 0;
  for (uint64_t pos = offset; pos < offset + length;) {
    const uint64_t v = pos / grain_;
    if (entries.empty() || v >= batch_first + entries.size()) {
      entries.clear();
      batch_first = v;
      engine_->MapEntries(v, std::min<uint64_t>(kBatch, (offset + length - 1) / grain_ - v + 1),
                          &entries);
    }
    const uint64_t end = std::min<uint64_t>((v + 1) * grain_, offset + length);
    const uint64_t e = entries[v - batch_first];
    uint32_t flags = 0;
    if (e == ZstdEngine::kUnmapped) flags = kExtentHole | kExtentZero;
    if (e == ZstdEngine::kZero) flags = kExtentZero;
    AppendExtent(out, pos, end - pos, flags);
    pos = end;
  }
  return OkStatus();
}

Status ZstdDevice::Check(CheckMode mode, CheckResult* out) {
  const uint64_t repaired_before = out->repaired;
  engine_->Check(mode, out);
  // Every fragment must decompress to exactly one grain.
  SyncIo io(lower_device());
  const uint64_t align = std::max<uint64_t>(4096, lower_device().geometry().mem_alignment);
  const uint32_t block = lower_device().geometry().logical_block;
  AlignedBuffer stored(grain_, align), plain(grain_, align);
  GrainDecompressor dec;
  for (const auto& [v, f] : engine_->Fragments()) {
    if (f.raw()) continue;
    const uint32_t lo = f.offset / block * block;
    const uint32_t hi = (f.offset + f.length + block - 1) / block * block;
    const uint64_t offset = data_offset_ + uint64_t{f.bin} * grain_ + lo;
    if (std::error_code ec = io.Read(offset, stored.span().first(hi - lo))) {
      return MakeError(ec, "zstd: check: cannot read bin " + std::to_string(f.bin) + ": " +
                               ec.message());
    }
    if (!dec.Decompress(stored.data() + (f.offset - lo), f.length, plain.data(), grain_)) {
      out->Corruption("zstd: the fragment of virtual offset " + std::to_string(v * grain_) +
                      " (bin " + std::to_string(f.bin) + ", offset " + std::to_string(f.offset) +
                      ", " + std::to_string(f.length) + " bytes) does not decompress");
    }
  }
  if (out->repaired > repaired_before && store_ && !store_->read_only()) return Commit();
  return OkStatus();
}

namespace {

ComponentInfo ZstdComponent() {
  ComponentInfo c;
  c.name = "zstd";
  c.kind = ComponentKind::kLayer;
  c.summary = "per-grain zstd compression with a stored-size rule (vsan-osa, sector, packed, "
              "min-saving=P)";
  c.options = {
      {"level", "zstd level; negative levels are the fast modes", "1"},
      {"grain", "compression grain: a power of two from 4K to 64K", "4K"},
      {"rule", "stored size: vsan-osa, sector, packed or min-saving=P", "sector"},
      {"size", "virtual size (thin; default: the size of the device below)", ""},
  };
  c.open_layer = [](DevicePtr lower, const OptionValues& values,
                    const OpenOptions& open) -> Result<DevicePtr> {
    VSTACK_ASSIGN_OR_RETURN(ZstdOptions o, ParseZstdOptions(values, lower->geometry().size_bytes));
    return ZstdDevice::Open(std::move(lower), o, open.read_only);
  };
  return c;
}

}  // namespace

VSTACK_REGISTER_COMPONENT(zstd, ZstdComponent());

}  // namespace vstack
