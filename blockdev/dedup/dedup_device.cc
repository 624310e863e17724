// The dedup device: options, formatting and opening, commits, accounting, check. The data path
// is in dedup_queue.cc, the state in dedup_engine.cc.
#include "blockdev/dedup/dedup_device.h"

#include <cassert>
#include <cstring>

#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/plural.h"
#include "lib/size.h"

namespace vstack {
namespace {

constexpr char kMagic[] = "VSDEDUP1";
constexpr uint32_t kPayloadVersion = 1;

// ---------------------------------------------------------------------------------------------
// Opening

std::vector<uint8_t> EncodePayload(uint32_t grain, uint64_t size, uint64_t pgrains) {
  ByteWriter w;
  w.U32(kPayloadVersion);
  w.U32(grain);
  w.U64(size);
  w.U64(pgrains);
  return std::move(w.bytes());
}

// Fits as many physical grains as the device below holds after the metadata they need.
Result<UnitLayout> PlanLayout(uint32_t grain, uint64_t size, uint64_t lower_size) {
  return FitUnits(
      lower_size, grain, DedupEngine::kMaxPhysicalGrains,
      [&](uint64_t pgrains) {
        return MetaStore::Plan(kMagic,
                               {TableDesc{0, size / grain, DedupEngine::kMapEntryBytes},
                                TableDesc{0, pgrains, DedupEngine::kGrainEntryBytes}},
                               GrainJournalBytes(lower_size),
                               EncodePayload(grain, size, pgrains));
      },
      "dedup: the device below (" + FormatSize(lower_size) +
          ") is too small for the metadata of a " + FormatSize(size) + " dedup device");
}

}  // namespace

uint64_t DedupMetadataBytes(uint64_t mapped_grains, uint64_t unique_grains) {
  return TableDesc{0, mapped_grains, DedupEngine::kMapEntryBytes}.bytes() +
         TableDesc{0, unique_grains, DedupEngine::kGrainEntryBytes}.bytes();
}

Result<DedupOptions> ParseDedupOptions(const OptionValues& values, uint64_t lower_size) {
  DedupOptions o;
  VSTACK_ASSIGN_OR_RETURN(static_cast<GrainOptions&>(o),
                          ParseGrainOptions(values, lower_size, "dedup", /*with_size=*/true));
  if (o.size / o.grain > DedupEngine::kMaxVirtualGrains) {
    return BadOptionValue("dedup", "size",
                          std::to_string(o.size) + " bytes are " +
                              std::to_string(o.size / o.grain) + " grains of " +
                              std::to_string(o.grain) + ", more than the " +
                              std::to_string(DedupEngine::kMaxVirtualGrains) +
                              " a 32-bit reference count allows; use a larger grain or give "
                              "size=");
  }
  VSTACK_ASSIGN_OR_RETURN(o.verify, values.Bool("verify"));
  return o;
}

DedupDevice::DedupDevice(DevicePtr lower, uint32_t grain, bool verify, uint64_t size,
                         uint64_t physical_grains, std::unique_ptr<MetaStore> store,
                         uint64_t data_offset, bool read_only)
    : MappedLayer("dedup", std::move(lower), grain, size, data_offset, std::move(store),
                  [&](MetaStore* s) {
                    return std::make_unique<DedupEngine>(size / grain, physical_grains, s);
                  },
                  read_only, kCommits),
      verify_(verify) {
  DeclareCounters({"dedup_hits", "unique_writes", "zero_grains", "rmw_reads", "verify_reads",
                   "collisions", "retries", "commits", "discards", "discarded_bytes"});
}

Result<DevicePtr> DedupDevice::Open(DevicePtr lower, const DedupOptions& o, bool read_only) {
  VSTACK_ASSIGN_OR_RETURN(OpenedBelow below,
                          OpenSuperblock(*lower, kMagic, "dedup", read_only, o.format));
  read_only = below.read_only;
  const uint64_t lower_size = below.lower_size;
  if (!below.sb) {
    // A blank device: format it (or, read-only, present it empty).
    VSTACK_ASSIGN_OR_RETURN(UnitLayout layout, PlanLayout(o.grain, o.size, lower_size));
    VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<MetaStore> store,
                            FormatUnlessReadOnly(*lower, layout.sb, read_only, "dedup"));
    DevicePtr dev(new DedupDevice(std::move(lower), o.grain, o.verify, o.size, layout.units,
                                  std::move(store), layout.sb.data_offset, read_only));
    VSTACK_RETURN_IF_ERROR(static_cast<DedupDevice&>(*dev).Load(/*blank=*/true));
    if (!read_only) static_cast<DedupDevice&>(*dev).set_formatted_now();
    return dev;
  }
  Superblock& sb = *below.sb;
  ByteReader r(sb.payload);
  const uint32_t version = r.U32();
  const uint32_t grain = r.U32();
  const uint64_t size = r.U64();
  const uint64_t pgrains = r.U64();
  const std::string where = "dedup: superblock: ";
  if (!r.ok() || version != kPayloadVersion) {
    return MakeError(Errc::kCorruption, where + "unknown or truncated dedup fields (version " +
                                            std::to_string(version) + ")");
  }
  if (!ValidGrain(grain) || size == 0 || size % grain ||
      size / grain > DedupEngine::kMaxVirtualGrains || pgrains == 0 ||
      pgrains > DedupEngine::kMaxPhysicalGrains || sb.tables.size() != 2 ||
      sb.tables[0].entries != size / grain || sb.tables[1].entries != pgrains ||
      sb.tables[0].entry_size != DedupEngine::kMapEntryBytes ||
      sb.tables[1].entry_size != DedupEngine::kGrainEntryBytes ||
      sb.data_offset + pgrains * grain > lower_size) {
    return MakeError(Errc::kCorruption,
                     where + "inconsistent geometry (grain " + std::to_string(grain) + ", size " +
                         std::to_string(size) + ", " +
                         Counted(pgrains, "physical grain", "physical grains") + ", device below " +
                         std::to_string(lower_size) + " bytes)");
  }
  if (o.grain_given && grain != o.grain) {
    return FormattedWith("dedup", "grain", std::to_string(grain), std::to_string(o.grain));
  }
  if (o.size_given && o.size != size) {
    return FormattedWith("dedup", "size", std::to_string(size), std::to_string(o.size));
  }
  const uint64_t data_offset = sb.data_offset;
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<MetaStore> store,
                          MetaStore::Attach(*lower, std::move(sb), read_only, "dedup"));
  DevicePtr dev(new DedupDevice(std::move(lower), grain, o.verify, size, pgrains,
                                std::move(store), data_offset, read_only));
  VSTACK_RETURN_IF_ERROR(static_cast<DedupDevice&>(*dev).Load(/*blank=*/false));
  return dev;
}

Result<std::unique_ptr<IoQueue>> DedupDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return NewDedupQueue(*this, std::move(lower));
}

// ---------------------------------------------------------------------------------------------
// Reporting

std::string DedupDevice::Describe() const {
  return "dedup grain=" + FormatSize(grain()) + (verify_ ? " verify=on" : "") + ", " +
         Counted(engine().physical_grains(), "physical grain", "physical grains");
}

std::optional<SpaceUsage> DedupDevice::Space() const {
  const DedupEngine::Usage u = engine().usage();
  const LayerStats st = Counts();  // no histogram merge
  SpaceUsage s;
  s.grain_bytes = grain();
  s.logical_bytes_written = st.of(Op::kWrite).bytes + st.of(Op::kWriteZeroes).bytes;
  s.logical_bytes_live = u.live_grains * grain();
  s.zero_grains = u.zero_grains;
  s.unique_grains = u.unique_grains;
  s.compressed_bytes = u.unique_grains * grain();
  s.stored_bytes = u.unique_grains * grain();
  s.physical_bytes_used = u.allocated_grains * grain();
  s.metadata_bytes = data_offset();
  s.data_offset = data_offset();
  return s;
}

void DedupDevice::Properties(PropertyList& out) const {
  const DedupEngine::Usage u = engine().usage();
  out.push_back({"grain", uint64_t{grain()}, "bytes"});
  out.push_back({"verify", verify_, ""});
  out.push_back({"virtual_grains", engine().virtual_grains(), ""});
  out.push_back({"physical_grains", engine().physical_grains(), ""});
  out.push_back({"data_offset", data_offset(), "bytes"});
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
  AppendJournalProperties(store(), out);
  if (auto s = Space()) AppendSpaceProperties(*s, out);
}

Status DedupDevice::Check(CheckMode mode, CheckResult* out) {
  const uint64_t repaired_before = out->repaired;
  engine().Check(mode, out);
  // Every used grain's content against its fingerprint.
  SyncIo io(lower_device());
  AlignedBuffer buf(grain(), std::max<uint64_t>(4096, lower_device().geometry().mem_alignment));
  for (const DedupEngine::UsedGrain& g : engine().UsedGrains()) {
    const uint64_t offset = data_offset() + uint64_t{g.pgrain} * grain();
    if (std::error_code ec = io.Read(offset, buf.span())) {
      return MakeError(ec, "dedup: check: cannot read physical grain " + std::to_string(g.pgrain) +
                               " at offset " + std::to_string(offset) + ": " + ec.message());
    }
    if (!(FingerprintOf(buf.data(), grain()) == g.fp)) {
      out->Corruption("dedup: physical grain " + std::to_string(g.pgrain) + " at offset " +
                      std::to_string(offset) +
                      " does not match its fingerprint (data of virtual offset " +
                      std::to_string(g.some_vgrain * grain()) + " and any duplicates)");
    }
  }
  return CommitRepairs(*out, repaired_before);
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
      FormatOptionInfo(),
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
