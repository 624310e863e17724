// The zstd policy: compress a grain and decide how it is stored, decompress fragments, check
// them; the options, reports and registration. Packing is packing_queue.cc.
#include "blockdev/zstd/zstd_device.h"

#include <algorithm>
#include <map>

#include "blockdev/zstd/grain_codec.h"
#include "blockdev/zstd/packing_queue.h"
#include "lib/cpu_tag.h"
#include "lib/plural.h"
#include "lib/registry.h"
#include "lib/size.h"

namespace vstack {

const GrainFormat ZstdDevice::kFormat = {
    "zstd", "VSZSTD01", /*version=*/2, /*oldest_version=*/1, /*entry_bytes=*/8,
    /*unit_entry_bytes=*/4, /*unit_records=*/false, /*max_units=*/0xFFFFFFFFull - 2,
    /*max_grains=*/uint64_t{1} << 48};

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
  VSTACK_ASSIGN_OR_RETURN(int64_t open_bins, values.Int("open_bins", 1, ZstdOptions::kMaxOpenBins));
  o.open_bins = static_cast<uint32_t>(open_bins);
  return o;
}

ZstdDevice::ZstdDevice(DevicePtr lower, const Header& h, const ZstdOptions& o,
                       std::unique_ptr<MetaStore> store, uint64_t data_offset, bool read_only)
    : GrainDevice(kFormat, std::move(lower), h.grain, h.size, h.units, data_offset,
                  std::move(store), read_only, kMappedOwnCaps, kMappedWriteCaps, 0,
                  /*verifies_reads=*/false,
                  {"compressed_grains", "raw_grains", "decompress_errors", "sealed_bins",
                   "sealed_free_bytes", "tail_reads"}),
      level_(o.level),
      open_bins_(o.open_bins),
      rule_(o.rule) {}

Result<DevicePtr> ZstdDevice::Open(DevicePtr lower, const ZstdOptions& opts, bool read_only) {
  ZstdOptions o = opts;
  return OpenJournaled(
      kFormat, std::move(lower), opts, read_only,
      [&](ByteWriter& w) {
        w.U8(opts.rule.kind);
        w.U32(opts.rule.min_saving_bp);
      },
      [&](ByteReader& r, const Header&) -> Status {
        SizeRule rule;
        rule.kind = static_cast<SizeRule::Kind>(r.U8());
        rule.min_saving_bp = r.U32();
        if (rule.kind > SizeRule::kMinSaving || rule.min_saving_bp >= 10000) {
          return MakeError(Errc::kCorruption, "zstd: superblock: unknown stored-size rule " +
                                                  std::to_string(int{rule.kind}));
        }
        if (opts.rule_given && !(opts.rule == rule)) {
          return FormattedWith("zstd", "rule", FormatSizeRule(rule), FormatSizeRule(opts.rule));
        }
        o.rule = rule;
        return OkStatus();
      },
      [&](DevicePtr l, const Header& h, std::unique_ptr<MetaStore> s, uint64_t data_offset,
          bool ro) { return new ZstdDevice(std::move(l), h, o, std::move(s), data_offset, ro); });
}

// ---------------------------------------------------------------------------------------------
// The policy

std::unique_ptr<GrainDevice::QueueState> ZstdDevice::NewQueueState(GrainIo& io) {
  return std::make_unique<PackingQueue>(*this, io);
}

Encoded ZstdDevice::Encode(QueueState* qs, const GrainWrite& w, const std::byte* bytes) {
  auto& q = static_cast<PackingQueue&>(*qs);
  const EncodedGrain e = [&] {
    internal::PhaseScope compress(*this, CpuPhase::kCompress);
    return EncodeGrain(q.compressor(), rule_, bytes, grain(), w.scratch);
  }();
  if (e.zero) return {Encoded::kZero, UnitMap::kZero};
  if (e.form.compressed) {
    q.io().Count(kCompressed);
    return {Encoded::kPack, 0, 0, e.compressed};
  }
  q.io().Count(kStoredRaw);  // a bin of its own, placed by the engine
  uint64_t bin;
  if (!w.TakeUnit(&bin)) {
    q.GiveUpHoles();  // their bins may hold nothing live any more
    return {Encoded::kNoSpace};
  }
  return {Encoded::kStore, 0, bin};
}

void ZstdDevice::Pack(QueueState* qs, GrainIo& io, std::span<void* const> grains,
                      std::span<const std::byte* const> bytes, std::span<const Encoded> e) {
  auto& q = static_cast<PackingQueue&>(*qs);
  internal::PhaseScope pack(*this, CpuPhase::kPack);
  for (size_t i = 0; i < grains.size(); ++i) {
    q.Pack(grains[i], bytes[i], e[i].length, ApplySizeRule(rule_, grain(), e[i].length).slot);
  }
}

Location ZstdDevice::Locate(uint64_t entry) const { return FragmentOf(entry); }

bool ZstdDevice::Decode(QueueState* qs, const std::byte* stored, uint32_t length,
                        std::byte* out) {
  auto& q = static_cast<PackingQueue&>(*qs);
  internal::PhaseScope decompress(*this, CpuPhase::kDecompress);
  if (q.decompressor().Decompress(stored, length, out, grain())) return true;
  q.io().Count(kDecompressErrors);
  return false;
}

std::string ZstdDevice::BadEntry(uint64_t entry) const {
  if (!UnitMap::HasUnit(entry)) return {};
  const Location f = FragmentOf(entry);
  if (f.raw() ? f.offset == 0 : uint64_t{f.offset} + f.length <= grain()) return {};
  return "(bin " + std::to_string(f.unit) + ", offset " + std::to_string(f.offset) + ", length " +
         std::to_string(f.length) + ") lies outside its bin of " + std::to_string(grain()) +
         " bytes";
}

void ZstdDevice::CheckMore(CheckMode mode, CheckResult* out) {
  std::map<uint64_t, std::vector<std::pair<uint64_t, Location>>> by_bin;
  map().ForEachMapped(0, map().grains(), [&](uint64_t v, uint64_t e) {
    if (UnitMap::HasUnit(e)) by_bin[FragmentOf(e).unit].emplace_back(v, FragmentOf(e));
  });
  for (auto& [bin, frags] : by_bin) {
    std::sort(frags.begin(), frags.end(),
              [](const auto& a, const auto& b) { return a.second.offset < b.second.offset; });
    const std::string name = "zstd: bin " + std::to_string(bin);
    for (size_t i = 0; i < frags.size(); ++i) {
      if (frags[i].second.raw() && frags.size() > 1) {
        out->Corruption(name + ": raw grain of virtual grain " + std::to_string(frags[i].first) +
                        " shares its bin with " + std::to_string(frags.size() - 1) +
                        " other fragment(s)");
        break;
      }
      const Location& p = i ? frags[i - 1].second : frags[i].second;
      if (i > 0 && p.offset + p.length > frags[i].second.offset) {
        out->Corruption(name + ": fragments of virtual grains " +
                        std::to_string(frags[i - 1].first) + " and " +
                        std::to_string(frags[i].first) + " overlap at offset " +
                        std::to_string(frags[i].second.offset) + " (doubly-used space)");
      }
    }
  }
}

GrainDevice::ScrubFinding ZstdDevice::ScrubGrain(uint64_t grain, uint64_t entry,
                                                 const std::byte* stored, uint32_t length,
                                                 CheckMode mode) {
  const Location f = FragmentOf(entry);
  if (f.raw()) return {};
  AlignedBuffer plain(this->grain());
  if (GrainDecompressor().Decompress(stored, length, plain.data(), this->grain())) return {};
  return "zstd: the fragment of virtual offset " + std::to_string(grain * this->grain()) +
         " (bin " + std::to_string(f.unit) + ", offset " + std::to_string(f.offset) + ", " +
         std::to_string(f.length) + " bytes) does not decompress";
}

// ---------------------------------------------------------------------------------------------
// Reporting and registration

std::string ZstdDevice::Describe() const {
  return "zstd level=" + std::to_string(level_) + " grain=" + FormatSize(grain()) +
         " rule=" + FormatSizeRule(rule_) + ", " + Counted(map().units(), "bin", "bins");
}

SpaceUsage ZstdDevice::Figures(uint64_t first, uint64_t count) const {
  SpaceUsage s;
  s.grain_bytes = grain();
  std::vector<uint64_t> bins;  // of the fragments in the range
  map().ForEachMapped(first, first + count, [&](uint64_t, uint64_t e) {
    s.logical_bytes_live += grain();
    if (e == UnitMap::kZero) {
      ++s.zero_grains;
      return;
    }
    const Location f = FragmentOf(e);
    ++s.unique_grains;
    s.compressed_bytes += f.raw() ? grain() : f.length;
    s.stored_bytes += f.raw() ? grain() : ApplySizeRule(rule_, grain(), f.length).slot;
    bins.push_back(f.unit);
  });
  std::sort(bins.begin(), bins.end());
  s.physical_bytes_used =
      static_cast<uint64_t>(std::unique(bins.begin(), bins.end()) - bins.begin()) * grain();
  return s;
}

std::optional<SpaceUsage> ZstdDevice::Space() const {
  SpaceUsage s = Figures(0, map().grains());
  const SpaceUsage base = BaseSpace();
  s.logical_bytes_written = base.logical_bytes_written;
  s.physical_bytes_used = base.physical_bytes_used;  // every bin not free
  s.metadata_bytes = base.metadata_bytes;
  s.data_offset = base.data_offset;
  return s;
}

std::optional<SpaceUsage> ZstdDevice::SpaceOf(uint64_t offset, uint64_t length) const {
  return Figures(offset / grain(), length / grain());
}

void ZstdDevice::Properties(PropertyList& out) const {
  const SpaceUsage s = *Space();
  uint64_t raw = 0;
  map().ForEachMapped(0, map().grains(), [&](uint64_t, uint64_t e) {
    raw += UnitMap::HasUnit(e) && FragmentOf(e).raw();
  });
  out.push_back({"level", int64_t{level_}, ""});
  out.push_back({"rule", FormatSizeRule(rule_), ""});
  out.push_back({"open_bins", uint64_t{open_bins_}, ""});
  BaseProperties(out);
  out.push_back({"raw_grains", raw, ""});
  out.push_back({"compression_ratio",
                 s.stored_bytes ? double(s.unique_grains * grain()) / double(s.stored_bytes) : 0.0,
                 ""});
  AppendSpaceProperties(s, out);
}

namespace {

ComponentInfo ZstdComponent() {
  std::vector<OptionInfo> options = GrainOptionInfos("compression", /*with_size=*/true);
  options.insert(options.begin(), {"level", "zstd level; negative levels are the fast modes", "1"});
  options.insert(
      options.begin() + 2,
      {{"rule", "stored size: vsan-osa, sector, packed or min-saving=P", "sector"},
       {"open_bins", "open bins per queue the packer fits fragments into (best fit), 1 to 64",
        "16"}});
  return LayerComponent(
      "zstd",
      "per-grain zstd compression with a stored-size rule (vsan-osa, sector, packed, "
      "min-saving=P)",
      std::move(options), &OpenGrainLayer<ZstdDevice, ParseZstdOptions>);
}

}  // namespace

VSTACK_REGISTER_COMPONENT(zstd, ZstdComponent());

}  // namespace vstack
