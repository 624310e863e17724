// The zstd device: options, formatting and opening, accounting, check. The data path is in
// zstd_queue.cc, the state in zstd_engine.cc.
#include "blockdev/zstd/zstd_device.h"

#include <cstring>

#include "blockdev/zstd/grain_codec.h"
#include "lib/aligned_buffer.h"
#include "lib/plural.h"
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

// Fits as many bins as the device below holds after the metadata they need.
Result<UnitLayout> PlanLayout(uint32_t grain, const SizeRule& rule, uint64_t size,
                              uint64_t lower_size) {
  return FitUnits(
      lower_size, grain, ZstdEngine::kMaxBins,
      [&](uint64_t bins) {
        return MetaStore::Plan(kMagic,
                               {TableDesc{0, size / grain, ZstdEngine::kMapEntryBytes},
                                TableDesc{0, bins, ZstdEngine::kBinEntryBytes}},
                               GrainJournalBytes(lower_size),
                               EncodePayload(grain, rule, size, bins));
      },
      "zstd: the device below (" + FormatSize(lower_size) +
          ") is too small for the metadata of a " + FormatSize(size) + " zstd device");
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
  VSTACK_ASSIGN_OR_RETURN(static_cast<GrainOptions&>(o),
                          ParseGrainOptions(values, lower_size, "zstd", /*with_size=*/true));
  o.rule_given = values.Has("rule");
  Result<SizeRule> rule = ParseSizeRule(values.Get("rule"));
  if (!rule) return BadOptionValue("zstd", "rule", rule.error().message);
  o.rule = *rule;
  VSTACK_ASSIGN_OR_RETURN(int64_t open_bins,
                          values.Int("open_bins", 1, ZstdOptions::kMaxOpenBins));
  o.open_bins = static_cast<uint32_t>(open_bins);
  return o;
}

ZstdDevice::ZstdDevice(DevicePtr lower, const ZstdOptions& o, uint64_t bins,
                       std::unique_ptr<MetaStore> store, uint64_t data_offset, bool read_only)
    : MappedLayer("zstd", std::move(lower), o.grain, o.size, data_offset, std::move(store),
                  [&](MetaStore* s) {
                    return std::make_unique<ZstdEngine>(o.size / o.grain, bins, o.grain, o.rule,
                                                        s);
                  },
                  read_only, kCommits),
      level_(o.level),
      open_bins_(o.open_bins) {
  DeclareCounters({"compressed_grains", "raw_grains", "zero_grains", "rmw_reads",
                   "decompress_errors", "retries", "commits", "discards", "discarded_bytes",
                   "sealed_bins", "sealed_free_bytes", "tail_reads"});
}

Result<DevicePtr> ZstdDevice::Open(DevicePtr lower, const ZstdOptions& opts, bool read_only) {
  VSTACK_ASSIGN_OR_RETURN(OpenedBelow below,
                          OpenSuperblock(*lower, kMagic, "zstd", read_only, opts.format));
  read_only = below.read_only;
  const uint64_t lower_size = below.lower_size;
  if (!below.sb) {
    VSTACK_ASSIGN_OR_RETURN(UnitLayout layout,
                            PlanLayout(opts.grain, opts.rule, opts.size, lower_size));
    VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<MetaStore> store,
                            FormatUnlessReadOnly(*lower, layout.sb, read_only, "zstd"));
    DevicePtr dev(new ZstdDevice(std::move(lower), opts, layout.units, std::move(store),
                                 layout.sb.data_offset, read_only));
    VSTACK_RETURN_IF_ERROR(static_cast<ZstdDevice&>(*dev).Load(/*blank=*/true));
    if (!read_only) static_cast<ZstdDevice&>(*dev).set_formatted_now();
    return dev;
  }
  Superblock& sb = *below.sb;
  ByteReader r(sb.payload);
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
  if (!ValidGrain(grain) || size == 0 || size % grain || bins == 0 ||
      bins > ZstdEngine::kMaxBins || sb.tables.size() != 2 ||
      sb.tables[0].entries != size / grain || sb.tables[1].entries != bins ||
      sb.tables[0].entry_size != ZstdEngine::kMapEntryBytes ||
      sb.tables[1].entry_size != ZstdEngine::kBinEntryBytes ||
      sb.data_offset + bins * grain > lower_size) {
    return MakeError(Errc::kCorruption,
                     where + "inconsistent geometry (grain " + std::to_string(grain) + ", size " +
                         std::to_string(size) + ", " + Counted(bins, "bin", "bins") +
                         ", device below " + std::to_string(lower_size) + " bytes)");
  }
  if (opts.grain_given && grain != opts.grain) {
    return FormattedWith("zstd", "grain", std::to_string(grain), std::to_string(opts.grain));
  }
  if (opts.size_given && opts.size != size) {
    return FormattedWith("zstd", "size", std::to_string(size), std::to_string(opts.size));
  }
  if (opts.rule_given && !(opts.rule == rule)) {
    return FormattedWith("zstd", "rule", FormatSizeRule(rule), FormatSizeRule(opts.rule));
  }
  ZstdOptions o = opts;
  o.grain = grain;
  o.size = size;
  o.rule = rule;
  const uint64_t data_offset = sb.data_offset;
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<MetaStore> store,
                          MetaStore::Attach(*lower, std::move(sb), read_only, "zstd"));
  DevicePtr dev(
      new ZstdDevice(std::move(lower), o, bins, std::move(store), data_offset, read_only));
  VSTACK_RETURN_IF_ERROR(static_cast<ZstdDevice&>(*dev).Load(/*blank=*/false));
  return dev;
}

Result<std::unique_ptr<IoQueue>> ZstdDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return NewZstdQueue(*this, std::move(lower));
}

// ---------------------------------------------------------------------------------------------
// Reporting

std::string ZstdDevice::Describe() const {
  return "zstd level=" + std::to_string(level_) + " grain=" + FormatSize(grain()) +
         " rule=" + FormatSizeRule(rule()) + ", " + Counted(engine().bins(), "bin", "bins");
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
  SpaceUsage s = ToSpace(engine().usage(), grain());
  const LayerStats st = Counts();  // no histogram merge
  s.logical_bytes_written = st.of(Op::kWrite).bytes + st.of(Op::kWriteZeroes).bytes;
  s.metadata_bytes = data_offset();
  s.data_offset = data_offset();
  return s;
}

std::optional<SpaceUsage> ZstdDevice::SpaceOf(uint64_t offset, uint64_t length) const {
  return ToSpace(engine().UsageOf(offset / grain(), length / grain()), grain());
}

void ZstdDevice::Properties(PropertyList& out) const {
  const ZstdEngine::Usage u = engine().usage();
  out.push_back({"level", int64_t{level_}, ""});
  out.push_back({"grain", uint64_t{grain()}, "bytes"});
  out.push_back({"rule", FormatSizeRule(rule()), ""});
  out.push_back({"open_bins", uint64_t{open_bins_}, ""});
  out.push_back({"virtual_grains", engine().virtual_grains(), ""});
  out.push_back({"bins", engine().bins(), ""});
  out.push_back({"data_offset", data_offset(), "bytes"});
  out.push_back({"raw_grains", u.raw_grains, ""});
  out.push_back({"compression_ratio",
                 u.stored_bytes ? double(u.stored_grains * grain()) / double(u.stored_bytes) : 0.0,
                 ""});
  AppendJournalProperties(store(), out);
  if (auto s = Space()) AppendSpaceProperties(*s, out);
}

Status ZstdDevice::Check(CheckMode mode, CheckResult* out) {
  const uint64_t repaired_before = out->repaired;
  engine().Check(mode, out);
  // Every fragment must decompress to exactly one grain.
  SyncIo io(lower_device());
  const uint64_t align = std::max<uint64_t>(4096, lower_device().geometry().mem_alignment);
  const uint32_t block = lower_device().geometry().logical_block;
  AlignedBuffer stored(grain(), align), plain(grain(), align);
  GrainDecompressor dec;
  for (const auto& [v, f] : engine().Fragments()) {
    if (f.raw()) continue;
    const uint32_t lo = f.offset / block * block;
    const uint32_t hi = (f.offset + f.length + block - 1) / block * block;
    const uint64_t offset = data_offset() + uint64_t{f.bin} * grain() + lo;
    if (std::error_code ec = io.Read(offset, stored.span().first(hi - lo))) {
      return MakeError(ec, "zstd: check: cannot read bin " + std::to_string(f.bin) + ": " +
                               ec.message());
    }
    if (!dec.Decompress(stored.data() + (f.offset - lo), f.length, plain.data(), grain())) {
      out->Corruption("zstd: the fragment of virtual offset " + std::to_string(v * grain()) +
                      " (bin " + std::to_string(f.bin) + ", offset " + std::to_string(f.offset) +
                      ", " + std::to_string(f.length) + " bytes) does not decompress");
    }
  }
  return CommitRepairs(*out, repaired_before);
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
      {"open_bins", "open bins per queue the packer fits fragments into (best fit), 1 to 64",
       "16"},
      {"size", "virtual size (thin; default: the size of the device below)", ""},
      FormatOptionInfo(),
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
