// dedup: inline deduplication of fixed-size grains, vSAN/VDO style.
//
// Spec: dedup[:grain=4K,verify=off|on,size=N,format=on]+<lower>
//
// What dedup adds to the grain engine (blockdev/grainmap/grain_device.h): each grain it writes
// is classified (fingerprint.h: zero test, then XXH3-128) and looked up in the fingerprint index
// (dedup_index.h); an identical grain already stored is shared (verify=on compares the bytes
// first), any other goes to a new unit, its fingerprint kept in the unit table. All the rest -
// the map and reference counts, copy-on-write reuse, read-modify-write, placement, commits,
// discards below, check - is the engine's. See docs/layers/dedup.md.
#ifndef VSTACK_BLOCKDEV_DEDUP_DEDUP_DEVICE_H_
#define VSTACK_BLOCKDEV_DEDUP_DEDUP_DEVICE_H_

#include <atomic>
#include <memory>
#include <vector>

#include "blockdev/dedup/dedup_index.h"
#include "blockdev/grainmap/grain_device.h"

namespace vstack {

// grain, size and format (grain_layer.h), and verify.
struct DedupOptions : GrainOptions {
  bool verify = false;
};

// Parses the options of a dedup spec part (shared with `vstack space`).
Result<DedupOptions> ParseDedupOptions(const OptionValues& values, uint64_t lower_size);

class DedupDevice final : public GrainDevice {
 public:
  // The format: a 4-byte map entry per virtual grain; per unit, a 20-byte record: the
  // fingerprint, then 4 bytes that version 1 used for the reference count (now derived from
  // the map at open; version 1 images are migrated on their first writable open).
  static const GrainFormat kFormat;
  // Reference counts are 32-bit and a unit has at most one reference per virtual grain.
  static constexpr uint64_t kMaxVirtualGrains = 0xFFFFFFFFull - 1;

  // Opens the dedup metadata on `lower`, formatting a blank device if it is fresh or
  // options.format (format=on) is given, else refusing it; read-only, a blank device is
  // presented as empty without writing anything.
  static Result<DevicePtr> Open(DevicePtr lower, const DedupOptions& options, bool read_only);

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  std::optional<SpaceUsage> Space() const override;

  bool verify() const { return verify_; }
  const DedupIndex& index() const { return index_; }

  enum Counter : size_t {
    kDedupHits = kBaseCounters, kUniqueWrites, kVerifyReads, kCollisions
  };

 private:
  DedupDevice(DevicePtr lower, const Header& h, bool verify, std::unique_ptr<MetaStore> store,
              uint64_t data_offset, bool read_only);

  // The policy (grain_device.h).
  std::unique_ptr<QueueState> NewQueueState(GrainIo& io) override;
  Encoded Encode(QueueState* qs, const GrainWrite& w, const std::byte* bytes) override;
  Encoded Confirm(QueueState* qs, const GrainWrite& w, const std::byte* bytes,
                  const std::byte* stored, Encoded e) override;
  void Unencode(const GrainWrite& w, const Encoded& e) override;
  void Stored(uint64_t unit) override;
  void Reclaim(std::span<const uint64_t> units,
               const std::function<bool(uint64_t)>& free_if) override;
  void UnitRecord(uint64_t unit, uint8_t* out) const override;
  Status LoadUnitRecord(uint64_t unit, const uint8_t* in) override;
  void FinishLoad() override;
  void CheckMore(CheckMode mode, CheckResult* out) override;
  ScrubFinding ScrubGrain(uint64_t grain, uint64_t entry, const std::byte* stored, uint32_t length,
                          CheckMode mode) override;

  // A new unit for fingerprint `fp`: indexed (pending for w.owner) unless `unindexed`.
  Encoded StoreNew(const GrainWrite& w, const Fingerprint& fp, bool unindexed);

  const bool verify_;
  DedupIndex index_;
  std::atomic<uint64_t> collisions_{0};
  std::vector<uint64_t> reclaim_units_;  // Reclaim's scratch (under the commit lock)
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_DEDUP_DEDUP_DEVICE_H_
