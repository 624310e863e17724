// GrainDevice: the base of every grain layer (dedup, zstd and crc32c; tomorrow lz4 or
// encryption). Read this header to write one: derive from GrainDevice and override the hooks
// of the "Policy" section below; everything else is done here and in grain_queue.cc.
//
// A grain layer cuts its virtual device into grains (4 KiB by default) and stores each grain on
// the device below after the layer's transform: deduplicated, compressed, checksummed. The
// engine does, the same way for every layer:
//  - options (`grain`, `size`, `format`), the superblock and its payload header, formatting,
//    attaching, loading and migrating older formats (OpenJournaled), reports, check and scrub,
//    the counters every grain layer has;
//  - the map from virtual grains to what is stored, with a reference count per physical unit,
//    remapping, its rebuild at load and its check (unit_map.h);
//  - the queue (grain_queue.h): cutting requests into grains, grain locks, read-modify-write of
//    partial grains, zero grains, allocating consecutive units so that the grains of one write go
//    below as one request, reads of consecutive stored grains as one request, remapping, retries
//    when space runs out (a commit first), and every request below;
//  - persistence (mapped layers): group commits of the map and the unit records through a
//    MetaStore (blockdev/metastore), copy-on-write reuse of units, discards of freed units below.
//
// A layer supplies its transform, per grain, on the thread of the queue that writes or reads:
//   Encode     a grain to write -> zero, shared with a stored unit (dedup), stored whole in a new
//              unit (raw), or encoded bytes the layer packs itself (zstd); or come back later
//   Locate     where an entry's bytes are: a whole unit, or a fragment of one
//   Decode     a fragment's bytes -> the grain
//   VerifyRead a grain read against what the layer keeps for it (crc32c)
// and the algorithms behind them in its own files (fingerprint and index; codec, size rule and
// bin packer; checksum table). If a layer's file builds an IoRequest, sets on_complete or opens
// the queue below, something is missing here: add it here.
//
// Two kinds of layer. A mapped layer (dedup, zstd) writes a grain's new content to a free unit
// and then remaps (copy-on-write); its units are the grains (or bins) of its data area, and its
// metadata is journaled. An in-place layer (crc32c) keeps every grain at its own position below;
// its map entry is what it keeps per grain (a checksum), and it persists that itself.
//
// Threading: every hook may be called from any queue's thread at once; a hook that touches
// shared state of the layer locks it itself (dedup's index shards). Per-queue state
// (QueueState) is only ever used by its queue's thread.
#ifndef VSTACK_BLOCKDEV_GRAINMAP_GRAIN_DEVICE_H_
#define VSTACK_BLOCKDEV_GRAINMAP_GRAIN_DEVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "blockdev/grainmap/grain_layer.h"
#include "blockdev/grainmap/unit_map.h"
#include "blockdev/metastore/meta_store.h"
#include "lib/property.h"

namespace vstack {

class GrainQueue;

// The capabilities of a mapped layer: it reads, flushes and reports extents; writable, it
// discards and zeroes by remapping (fast, and discarded grains read as zeros).
inline constexpr Capabilities kMappedOwnCaps = kCapRead | kCapFlush | kCapExtents;
inline constexpr Capabilities kMappedWriteCaps =
    kCapWrite | kCapDiscard | kCapWriteZeroes | kCapDiscardZeroes | kCapFastZeroes;

// What a grain layer's format is (the constants of its superblock and tables).
struct GrainFormat {
  const char* name;           // "dedup": the spec name, and the prefix of every message
  const char* magic;          // 8 characters, e.g. "VSDEDUP1"
  uint32_t version;           // written by this code
  uint32_t oldest_version;    // the oldest version it opens (older ones migrate on open)
  uint32_t entry_bytes;       // a map entry on disk and in memory: 4 or 8
  uint32_t unit_entry_bytes;  // an entry of the unit table on disk (one per unit)
  bool unit_records;          // the layer keeps records there (UnitRecord); else it stays zero
  uint64_t max_units;
  uint64_t max_grains;        // virtual grains

  // The map table of `grains` entries and the unit table of `units` (offsets left 0), and the
  // bytes of their pages (what `vstack space` reports as the layer's metadata).
  std::vector<TableDesc> Tables(uint64_t grains, uint64_t units) const {
    return {TableDesc{0, grains, entry_bytes}, TableDesc{0, units, unit_entry_bytes}};
  }
  uint64_t MetadataBytes(uint64_t grains, uint64_t units) const {
    return TableDesc{0, grains, entry_bytes}.bytes() +
           TableDesc{0, units, unit_entry_bytes}.bytes();
  }
};

// One grain of a write, as Encode sees it.
struct GrainWrite {
  uint64_t grain = 0;            // the virtual grain
  uint64_t owner = 0;            // the write it belongs to (grains of one write share it)
  std::byte* scratch = nullptr;  // a grain-size buffer for encoded bytes (EncodesToScratch)
  UnitMap* map = nullptr;
  UnitMap::Journal* journal = nullptr;
  // The next free unit: consecutive within one write while free space allows. False when
  // there is none (the engine then commits, which may free some, and tries again once).
  bool TakeUnit(uint64_t* unit) const { return map->TakeUnit(*journal, unit); }
};

// What Encode decided for one grain.
struct Encoded {
  enum Kind : uint8_t {
    kZero,     // all zeros: stored as nothing (entry kZero)
    kStore,    // the grain's bytes go whole to `unit` (mapped: taken with TakeUnit; in place:
               // its own position); `entry` is the in-place layer's entry
    kShare,    // map to `entry`, whose unit's reference the layer has already taken (dedup)
    kPack,     // `length` encoded bytes in the scratch buffer: the layer packs them (Pack)
    kConfirm,  // read `unit` first: Confirm decides (dedup's verify=on)
    kBusy,     // the grain must wait (an identical grain is being written): retried later
    kNoSpace,  // no free unit
  };
  Kind kind = kZero;
  uint64_t entry = 0;
  uint64_t unit = 0;
  uint32_t length = 0;
};

// Where an entry's bytes are below: `length` bytes at `offset` of `unit`, or (length 0) the
// whole unit as the grain itself (raw: read straight into the caller's buffer).
struct Location {
  uint64_t unit = 0;
  uint32_t offset = 0;
  uint32_t length = 0;
  bool raw() const { return length == 0; }
};

// What a layer's per-queue code (QueueState) may ask of its queue: I/O below and references.
class GrainIo {
 public:
  using Done = void (*)(void* ctx, std::error_code status);
  // Reads or writes `length` bytes at `offset` of the data area below (the layer's units),
  // with this queue's next batch; `done(ctx, status)` runs on completion.
  virtual void Issue(Op op, uint64_t offset, std::byte* buf, uint32_t length, Done done,
                     void* ctx) = 0;
  // A grain Pack took is stored at `entry` (status ok) or failed: the engine remaps it. A
  // stored fragment's unit is referenced from this call on (until the write fails, or its
  // grain is remapped again), so the layer may Unhold the unit as soon as Packed returns.
  virtual void Packed(void* grain, uint64_t entry, std::error_code status) = 0;
  // References held by the layer (a bin being filled; the engine counts them for Check, and
  // Unhold drops one this queue holds) and new units, as in GrainWrite.
  virtual void Hold(uint64_t unit) = 0;
  virtual void Unhold(uint64_t unit) = 0;
  virtual bool TakeUnit(uint64_t* unit) = 0;
  // Blocks until nothing this queue sent below is in flight (before blocking on metadata I/O).
  virtual void Quiesce() = 0;
  virtual void Count(size_t counter, uint64_t n = 1) = 0;

 protected:
  ~GrainIo() = default;
};

class GrainDevice : public GrainLayer {
 public:
  // The counters of every grain layer; a layer's own follow (DeclareCounters(extra)).
  enum BaseCounter : size_t {
    kZeroGrains, kRmwReads, kRetries, kCommits, kDiscards, kDiscardedBytes,
    kDurableWaitUs,  // commits' and checkpoints' waits for flushes and FUA writes below, in us
    kBaseCounters
  };

  // ---- Policy: what a layer overrides. -----------------------------------------------------

  // Per-queue state of the layer (codec contexts, a packer). Default: none.
  struct QueueState {
    virtual ~QueueState() = default;
  };
  virtual std::unique_ptr<QueueState> NewQueueState(GrainIo& io) { return nullptr; }
  // Whether Encode writes encoded bytes (kPack) into GrainWrite::scratch; if not, the engine
  // passes no scratch buffer (nullptr) and takes none from its pool per grain.
  virtual bool EncodesToScratch() const { return false; }

  // Decides how to store one grain of `bytes` (grain() bytes, contiguous). kShare must have
  // taken its unit's reference (AddRef, under the layer's own lock); kStore a unit
  // (w.TakeUnit) unless in place. Whatever Encode took goes back through Unencode if the write
  // does not complete (it failed, or another grain of it must wait).
  virtual Encoded Encode(QueueState* qs, const GrainWrite& w, const std::byte* bytes) = 0;
  // After kConfirm: `stored` holds unit e.unit; returns the final decision (not kConfirm).
  virtual Encoded Confirm(QueueState* qs, const GrainWrite& w, const std::byte* bytes,
                          const std::byte* stored, Encoded e) { return e; }
  // Undoes an Encode of a write that does not complete (kShare's reference is dropped by the
  // engine; kStore's unit goes back).
  virtual void Unencode(const GrainWrite& w, const Encoded& e) {}
  // kPack grains: `grains[i]` is the engine's handle, `bytes[i]` and `e[i].length` the encoded
  // bytes; each is reported back with io.Packed once its bytes are below (or failed).
  virtual void Pack(QueueState* qs, GrainIo& io, std::span<void* const> grains,
                    std::span<const std::byte* const> bytes, std::span<const Encoded> e) {}
  // A stored grain's unit got new content and is mapped now (dedup: its index entry is live).
  virtual void Stored(uint64_t unit) {}

  virtual Location Locate(uint64_t entry) const { return {UnitMap::UnitOf(entry), 0, 0}; }
  // A fragment's `length` stored bytes -> the grain at `out` (grain() bytes). False: corrupt.
  virtual bool Decode(QueueState* qs, const std::byte* stored, uint32_t length, std::byte* out) {
    return false;
  }
  // A grain read (bytes [off, off+grain()) of the iovecs) against `entry`. Called only when
  // verifies_reads(). False: the read is retried once holding the grain locks (a write may
  // have overlapped it), then fails with Errc::kChecksumMismatch; `last_try` is true when the
  // grain is locked (the mismatch is real: record it).
  virtual bool VerifyRead(uint64_t grain, uint64_t entry, const iovec* iov, uint32_t iovcnt,
                          uint64_t off, bool last_try) { return true; }

  // In-place layers: before a write of grains [first, first+count) is started (it may block,
  // after io.Quiesce()) and after it finished. AfterWrite follows every BeforeWrite, once,
  // whether BeforeWrite or the write failed or not.
  virtual Status BeforeWrite(GrainIo& io, uint64_t first, uint64_t count) { return OkStatus(); }
  virtual void AfterWrite(uint64_t first, uint64_t count) {}
  // In-place layers: the write of grains [first, first+count) failed below (before AfterWrite,
  // the grains still locked). Each of its sectors may hold its old or its new bytes, as the
  // device contract allows for a failed write, so what the layer kept for those grains (a
  // checksum) may describe neither.
  virtual void WriteFailed(uint64_t first, uint64_t count) {}

  // Mapped layers: a unit's record in the unit table (format.unit_entry_bytes), and back.
  virtual void UnitRecord(uint64_t unit, uint8_t* out) const {}
  virtual Status LoadUnitRecord(uint64_t unit, const uint8_t* in) { return OkStatus(); }
  // An entry loaded from disk that the layer rejects (e.g. a fragment outside its bin): a
  // message, or empty.
  virtual std::string BadEntry(uint64_t entry) const { return {}; }
  // After loading (references are counted): rebuild what the layer derives from the map.
  virtual void FinishLoad() {}
  // Units released and unreferenced, on their way to reuse: calls free_if(u) for each, under
  // whatever lock keeps the layer from referencing u again (dedup's index shards: one lock per
  // shard, not per unit), and forgets those for which it returns true (their index entries).
  // Called only by a commit, under the commit lock: never twice at once.
  virtual void Reclaim(std::span<const uint64_t> units,
                       const std::function<bool(uint64_t)>& free_if) {
    for (uint64_t u : units) free_if(u);
  }
  // Check: the layer's own consistency checks (no I/O), and what is wrong with a stored grain's
  // bytes (scrub; an empty problem: nothing). With a repair mode, ScrubGrain may repair what the
  // layer keeps for the grain (crc32c's repair-all accepts the data's checksum) and say so; the
  // engine then commits, once, at the end of the check.
  struct ScrubFinding {
    ScrubFinding(std::string problem = {}, bool repaired = false)
        : problem(std::move(problem)), repaired(repaired) {}
    std::string problem;
    bool repaired;
  };
  virtual void CheckMore(CheckMode mode, CheckResult* out) {}
  virtual ScrubFinding ScrubGrain(uint64_t grain, uint64_t entry, const std::byte* stored,
                                  uint32_t length, CheckMode mode) {
    return {};
  }

  // ---- What the engine offers. ---------------------------------------------------------------

  const GrainFormat& format() const { return format_; }
  UnitMap& map() { return map_; }
  const UnitMap& map() const { return map_; }
  bool in_place() const { return map_.units() == 0; }
  bool verifies_reads() const { return verifies_reads_; }
  MetaStore* store() const { return store_.get(); }

  // Commits (mapped layers: group commit of the map and unit records; then frees the units
  // whose release it made durable, and discards below those that stayed free). Blocks.
  enum class CommitKind { kFlush, kDue, kMakeRoom, kClose };
  virtual Status Commit(CommitKind kind);
  // True when a queue should commit before its next batch: its share of a journal's worth of
  // records is pending, or of a quarter of the units, or of the units free now (at least 8
  // records). (Released units are reused only after a commit, so the last two bound the garbage
  // a layer holds, the third ever tighter as the room shrinks; under another thin layer, such
  // as dedup over zstd, that garbage fills the layer below until a commit lets it go.)
  bool commit_due(size_t pending_records) const {
    const size_t queues = std::max<size_t>(1, open_queues());
    return pending_records * 16 > commit_threshold_ / queues ||
           (map_.units() != 0 && (pending_records * 4 > map_.units() / queues ||
                                  (pending_records >= 8 &&
                                   pending_records * queues > map_.free_units_hint())));
  }

  // Reading the map of [offset, offset+length): zero and unmapped grains (kCapExtents).
  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override;
  // Zeros: a grain never written since the format is one a mapped layer maps to nothing, and
  // one an in-place layer's format zeroed below.
  UnwrittenOrigin OriginOfUnwritten(uint64_t offset) const override {
    return UnwrittenOrigin::Zeros(size_bytes() - offset);
  }
  // The map's check, the layer's (CheckMore), then every stored grain read back (ScrubGrain).
  Status Check(CheckMode mode, CheckResult* out) override;

 protected:
  // `units`: 0 for an in-place layer; `verifies_reads`: call VerifyRead on every grain read.
  // `store` is null for a read-only blank device and for in-place layers. Capabilities as
  // GrainLayer's (own reading ones, writes, and those the writes take from below).
  GrainDevice(const GrainFormat& format, DevicePtr lower, uint32_t grain, uint64_t size,
              uint64_t units, uint64_t data_offset, std::unique_ptr<MetaStore> store,
              bool read_only, Capabilities own, Capabilities writes,
              Capabilities writes_from_below, bool verifies_reads,
              const std::vector<std::string>& counters);

  // The payload of a mapped layer's superblock: [u32 version][u32 grain][the layer's fields]
  // [u64 size][u64 units] (the layer's fields written by `extra`, read back by the caller of
  // OpenJournaled).
  struct Header {
    uint32_t version = 0;
    uint32_t grain = 0;
    uint64_t size = 0;
    uint64_t units = 0;
  };
  static std::vector<uint8_t> EncodeHeader(const GrainFormat& f, uint32_t grain, uint64_t size,
                                           uint64_t units,
                                           const std::function<void(ByteWriter&)>& extra);

  // Opens a mapped layer: formats a blank device (or presents it empty, read-only), or
  // checks the superblock (version, geometry, tables, the options the user gave against the
  // stored ones; `extra` reads the layer's fields and says what disagrees), attaches and loads
  // it, and migrates an older version (rewrites the payload at the current version).
  // `make(lower, header, store, data_offset, read_only)` creates the device. `check_new` checks
  // the options that matter only for a blank device (its virtual size: a formatted device keeps
  // its own), before it is formatted or presented.
  using MakeDevice = std::function<GrainDevice*(DevicePtr, const Header&,
                                                std::unique_ptr<MetaStore>, uint64_t, bool)>;
  using ReadExtra = std::function<Status(ByteReader&, const Header&)>;
  static Result<DevicePtr> OpenJournaled(const GrainFormat& f, DevicePtr lower,
                                         const GrainOptions& o, bool read_only,
                                         const std::function<void(ByteWriter&)>& write_extra,
                                         const ReadExtra& read_extra, const MakeDevice& make,
                                         const std::function<Status()>& check_new = {});

  // Usage figures for Space() and Properties().
  UnitMap::Usage usage() const { return map_.usage(); }
  // The space figures common to mapped layers (the layer adds its own).
  SpaceUsage BaseSpace() const;
  // The journal figures and a mapped layer's common properties.
  void BaseProperties(PropertyList& out) const;

  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;
  Status CloseLayer() override;

 private:
  friend class GrainQueue;
  Status Load(bool blank);
  // Discards `units` below in merged runs, then frees them. REQUIRES: the commit lock.
  void DiscardUnits(std::vector<uint64_t>& units);
  // Reads every stored grain (in runs of up to 1 MiB) and asks ScrubGrain. Counts every finding
  // and lists the first kMaxScrubMessages, then how many more there were.
  Status Scrub(CheckMode mode, CheckResult* out);
  static constexpr uint64_t kMaxScrubMessages = 100;

  const GrainFormat format_;
  UnitMap map_;
  std::unique_ptr<MetaStore> store_;
  MetaBatch batch_;  // a commit's records, reused; under the commit lock
  const bool verifies_reads_;
  size_t commit_threshold_ = 0;
  uint64_t durable_wait_counted_us_ = 0;  // of the store's durable_wait_ns (the commit lock)
};

// The `grain`, `size` and `format` options of a grain layer's ComponentInfo.
std::vector<OptionInfo> GrainOptionInfos(const char* what, bool with_size);

// The registry's open function of a grain layer: `Parse(values, lower size)` reads its options,
// `Device::Open(lower, options, read_only)` opens it.
template <class Device, auto Parse>
Result<DevicePtr> OpenGrainLayer(DevicePtr lower, const OptionValues& values,
                                 const OpenOptions& open) {
  VSTACK_ASSIGN_OR_RETURN(auto options, Parse(values, lower->geometry().size_bytes));
  return Device::Open(std::move(lower), options, open.read_only);
}

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_GRAINMAP_GRAIN_DEVICE_H_
