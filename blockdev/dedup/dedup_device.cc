// The dedup policy: classify a grain, look it up, share it or store it; the unit records; the
// reports and the registration. Everything else is the grain engine's.
#include "blockdev/dedup/dedup_device.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "lib/cpu_tag.h"
#include "lib/plural.h"
#include "lib/endian.h"
#include "lib/registry.h"
#include "lib/size.h"

namespace vstack {

const GrainFormat DedupDevice::kFormat = {
    "dedup", "VSDEDUP1", /*version=*/2, /*oldest_version=*/1, /*entry_bytes=*/4,
    /*unit_entry_bytes=*/20, /*unit_records=*/true, /*max_units=*/0xFFFFFFFFull - 2,
    DedupDevice::kMaxVirtualGrains};

namespace {

// The queue's own part: only its counters.
struct DedupQueue : GrainDevice::QueueState {
  explicit DedupQueue(GrainIo& io) : io(io) {}
  GrainIo& io;
};

GrainIo& IoOf(GrainDevice::QueueState* qs) { return static_cast<DedupQueue*>(qs)->io; }

}  // namespace

// Why the virtual size `o.size` is too large: its grains outnumber what a 32-bit reference
// count allows. Says where the size came from (size=, or the device below when size= was not
// given), the largest size at this grain, and what to change: a smaller size= or a larger grain
// (none is larger than 64K).
std::string TooManyGrains(const DedupOptions& o) {
  const uint64_t max_size = DedupDevice::kMaxVirtualGrains * o.grain;
  const std::string grain = FormatSize(o.grain);
  const std::string what =
      o.size_given
          ? std::to_string(o.size) + " bytes"
          : "not given, so the size of the device below: " + std::to_string(o.size) + " bytes";
  const std::string limit = o.size_given
                                ? "at grain " + grain + " the size is at most " +
                                      std::to_string(max_size) + " bytes; give a smaller size="
                                : "give size= of at most " + std::to_string(max_size) + " bytes";
  const bool larger_grain = o.grain < kMaxGrainBytes;
  return what + " are " + std::to_string(o.size / o.grain) + " grains of " + grain +
         ", more than the " + std::to_string(DedupDevice::kMaxVirtualGrains) +
         " a 32-bit reference count allows: " + limit + (larger_grain ? " or a larger grain" : "");
}

Result<DedupOptions> ParseDedupOptions(const OptionValues& values, uint64_t lower_size) {
  DedupOptions o;
  VSTACK_ASSIGN_OR_RETURN(static_cast<GrainOptions&>(o),
                          ParseGrainOptions(values, lower_size, "dedup", /*with_size=*/true));
  // The size of the device below, taken when size= is not given, is checked only if a new
  // device is made (Open): a formatted one keeps its own.
  if (o.size_given && o.size / o.grain > DedupDevice::kMaxVirtualGrains) {
    return BadOptionValue("dedup", "size", TooManyGrains(o));
  }
  VSTACK_ASSIGN_OR_RETURN(o.verify, values.Bool("verify"));
  return o;
}

DedupDevice::DedupDevice(DevicePtr lower, const Header& h, bool verify,
                         std::unique_ptr<MetaStore> store, uint64_t data_offset, bool read_only)
    : GrainDevice(kFormat, std::move(lower), h.grain, h.size, h.units, data_offset,
                  std::move(store), read_only, kMappedOwnCaps, kMappedWriteCaps, 0,
                  /*verifies_reads=*/false,
                  {"dedup_hits", "unique_writes", "verify_reads", "collisions"}),
      verify_(verify),
      index_(h.units, h.size / h.grain) {}

Result<DevicePtr> DedupDevice::Open(DevicePtr lower, const DedupOptions& o, bool read_only) {
  return OpenJournaled(
      kFormat, std::move(lower), o, read_only, [](ByteWriter&) {},
      [](ByteReader&, const Header&) { return OkStatus(); },
      [&](DevicePtr l, const Header& h, std::unique_ptr<MetaStore> s, uint64_t data_offset,
          bool ro) {
        return new DedupDevice(std::move(l), h, o.verify, std::move(s), data_offset, ro);
      },
      [&]() -> Status {
        if (o.size / o.grain <= kMaxVirtualGrains) return OkStatus();
        return BadOptionValue("dedup", "size", TooManyGrains(o));
      });
}

// ---------------------------------------------------------------------------------------------
// The policy

std::unique_ptr<GrainDevice::QueueState> DedupDevice::NewQueueState(GrainIo& io) {
  return std::make_unique<DedupQueue>(io);
}

Encoded DedupDevice::Encode(QueueState* qs, const GrainWrite& w, const std::byte* bytes) {
  Fingerprint fp;
  bool nonzero;
  {
    internal::PhaseScope hash(*this, CpuPhase::kHash);
    nonzero = ClassifyGrain(bytes, grain(), &fp);
  }
  if (!nonzero) return {Encoded::kZero, UnitMap::kZero};
  internal::PhaseScope index(*this, CpuPhase::kIndex);
  auto lock = index_.Lock(fp);
  const std::optional<DedupIndex::Hit> hit = index_.Find(fp);
  if (hit && hit->owner && hit->owner != w.owner) return {Encoded::kBusy};  // on its way below
  if (hit && verify_ && !hit->owner) {  // (the write entered the read generation: not reused)
    IoOf(qs).Count(kVerifyReads);
    return {Encoded::kConfirm, 0, hit->unit};
  }
  if (hit && !verify_) {  // (a grain of this same write, or any stored one)
    map().AddRef(*w.journal, hit->unit);
    IoOf(qs).Count(kDedupHits);
    return {Encoded::kShare, UnitMap::EntryOf(hit->unit)};
  }
  // New, or (verify=on) another grain of this write that is not below yet: stored anew.
  IoOf(qs).Count(kUniqueWrites);
  return StoreNew(w, fp, /*unindexed=*/hit.has_value());
}

Encoded DedupDevice::Confirm(QueueState* qs, const GrainWrite& w, const std::byte* bytes,
                             const std::byte* stored, Encoded e) {
  const Fingerprint fp = index_.Of(e.unit);
  auto lock = index_.Lock(fp);
  const std::optional<DedupIndex::Hit> hit = index_.Find(fp);
  if (stored && std::memcmp(stored, bytes, grain()) == 0 && hit && hit->unit == e.unit &&
      !hit->owner) {
    map().AddRef(*w.journal, e.unit);
    IoOf(qs).Count(kDedupHits);
    return {Encoded::kShare, UnitMap::EntryOf(e.unit)};
  }
  if (stored && hit && hit->unit == e.unit) {  // same fingerprint, other bytes
    IoOf(qs).Count(kCollisions);
    collisions_.fetch_add(1, std::memory_order_relaxed);
  }
  IoOf(qs).Count(kUniqueWrites);
  // Stored anew, unindexed if the fingerprint stays taken (or freed and taken again since).
  return StoreNew(w, fp, /*unindexed=*/hit.has_value());
}

Encoded DedupDevice::StoreNew(const GrainWrite& w, const Fingerprint& fp, bool unindexed) {
  uint64_t unit;
  if (!w.TakeUnit(&unit)) return {Encoded::kNoSpace};
  index_.Set(unit, fp);
  if (!unindexed) index_.Insert(fp, unit, w.owner);
  return {Encoded::kStore, 0, unit};
}

void DedupDevice::Unencode(const GrainWrite& w, const Encoded& e) {
  if (e.kind == Encoded::kConfirm) return;
  auto lock = index_.Lock(index_.Of(e.unit));
  index_.Erase(e.unit);  // its pending entry (kStore), if indexed
}

void DedupDevice::Stored(uint64_t unit) { index_.Ready(unit); }

void DedupDevice::Reclaim(std::span<const uint64_t> units,
                          const std::function<bool(uint64_t)>& free_if) {
  // Encode's hits take references under the shard locks: check and erase under them, a shard
  // at a time. The units are grouped by shard with a counting sort into reclaim_units_ (reused:
  // a commit allocates nothing here once warm; Reclaim runs inside Commit, under its lock).
  constexpr size_t kShards = size_t{1} << DedupIndex::kShardBits;
  std::array<size_t, kShards + 1> start{};
  for (uint64_t u : units) ++start[DedupIndex::ShardOf(index_.Of(u)) + 1];
  for (size_t s = 0; s < kShards; ++s) start[s + 1] += start[s];
  std::array<size_t, kShards> next;
  std::copy(start.begin(), start.end() - 1, next.begin());
  reclaim_units_.resize(units.size());
  for (uint64_t u : units) reclaim_units_[next[DedupIndex::ShardOf(index_.Of(u))]++] = u;
  for (size_t s = 0; s < kShards; ++s) {
    if (start[s] == start[s + 1]) continue;
    auto lock = index_.Lock(index_.Of(reclaim_units_[start[s]]));
    for (size_t i = start[s]; i < start[s + 1]; ++i) {
      if (free_if(reclaim_units_[i])) index_.Erase(reclaim_units_[i]);
    }
  }
}

void DedupDevice::UnitRecord(uint64_t unit, uint8_t* out) const {
  const Fingerprint fp = index_.Of(unit);
  StoreLE64(out, fp.lo);
  StoreLE64(out + 8, fp.hi);  // bytes 16..19 stay zero (version 1: the reference count)
}

Status DedupDevice::LoadUnitRecord(uint64_t unit, const uint8_t* in) {
  index_.Set(unit, Fingerprint{LoadLE64(in), LoadLE64(in + 8)});
  return OkStatus();
}

void DedupDevice::FinishLoad() {
  for (uint64_t u = map().NextLoadedUnit(0); u < map().units(); u = map().NextLoadedUnit(u + 1)) {
    if (map().refs(u) == 0) continue;
    const Fingerprint fp = index_.Of(u);
    auto lock = index_.Lock(fp);
    if (!index_.Find(fp)) index_.Insert(fp, u, 0);  // (a duplicate kept after a collision: not)
  }
}

void DedupDevice::CheckMore(CheckMode mode, CheckResult* out) {
  for (uint64_t u = 0; u < map().units(); ++u) {
    if (map().refs(u) == 0) continue;
    const Fingerprint fp = index_.Of(u);
    auto lock = index_.Lock(fp);
    if (!index_.Find(fp)) {
      out->Corruption("dedup: unit " + std::to_string(u) + ": its fingerprint is not in the index");
    }
  }
}

GrainDevice::ScrubFinding DedupDevice::ScrubGrain(uint64_t grain, uint64_t entry,
                                                  const std::byte* stored, uint32_t length,
                                                  CheckMode mode) {
  const uint64_t unit = UnitMap::UnitOf(entry);
  if (FingerprintOf(stored, length) == index_.Of(unit)) return {};
  return "dedup: unit " + std::to_string(unit) + " at offset " +
         std::to_string(data_offset() + unit * this->grain()) +
         " does not match its fingerprint (data of virtual offset " +
         std::to_string(grain * this->grain()) + " and any duplicates)";
}

// ---------------------------------------------------------------------------------------------
// Reporting and registration

std::string DedupDevice::Describe() const {
  return "dedup grain=" + FormatSize(grain()) + (verify_ ? " verify=on" : "") + ", " +
         Counted(map().units(), "physical grain", "physical grains");
}

std::optional<SpaceUsage> DedupDevice::Space() const {
  SpaceUsage s = BaseSpace();
  s.unique_grains = usage().used;
  s.compressed_bytes = s.stored_bytes = s.unique_grains * grain();
  return s;
}

void DedupDevice::Properties(PropertyList& out) const {
  const UnitMap::Usage u = usage();
  const uint64_t index_bytes = index_.memory_bytes();
  BaseProperties(out);
  out.push_back({"verify", verify_, ""});
  out.push_back({"index_entries", index_.entries(), ""});
  out.push_back({"index_memory_bytes", index_bytes, "bytes"});
  out.push_back({"index_bytes_per_unique_grain", u.used ? double(index_bytes) / double(u.used) : 0.0,
                 "bytes"});
  out.push_back({"dedup_ratio", u.used ? double(u.live - u.zeros) / double(u.used) : 0.0, ""});
  out.push_back({"hash_collisions", collisions_.load(), ""});
  if (auto s = Space()) AppendSpaceProperties(*s, out);
}

namespace {

ComponentInfo DedupComponent() {
  std::vector<OptionInfo> options = GrainOptionInfos("deduplication", /*with_size=*/true);
  options.insert(
      options.begin() + 1,
      {"verify", "compare bytes before sharing a grain (safe against hash collisions)", "off"});
  return LayerComponent(
      "dedup", "inline deduplication of fixed-size grains (XXH3-128, zero elimination, refcounts)",
      std::move(options), &OpenGrainLayer<DedupDevice, ParseDedupOptions>);
}

}  // namespace

VSTACK_REGISTER_COMPONENT(dedup, DedupComponent());

}  // namespace vstack
