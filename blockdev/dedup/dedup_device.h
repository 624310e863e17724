// dedup: inline deduplication of fixed-size grains, vSAN/VDO style.
//
// Spec: dedup[:grain=4K,verify=off|on,size=N]+<lower>
//
// Every write is cut into grains (4 KiB by default, up to 64 KiB). An all-zero grain becomes a
// map entry and costs no space; any other grain is fingerprinted with XXH3-128 and shared with
// an identical grain already stored (verify=on compares the bytes first), or written to a free
// physical grain. Physical grains are reference-counted; an overwrite, write-zeroes or discard
// releases the old grain, which is reused once a commit has made the release durable. A
// partial-grain write is a read-modify-write. Metadata (map, grain table with fingerprints and
// reference counts, journal) lives at the start of the device below; data follows it. See
// docs/layers/dedup.md.
#ifndef VSTACK_BLOCKDEV_DEDUP_DEDUP_DEVICE_H_
#define VSTACK_BLOCKDEV_DEDUP_DEDUP_DEVICE_H_

#include <memory>

#include "blockdev/dedup/dedup_engine.h"
#include "blockdev/grainmap/mapped_layer.h"

namespace vstack {

// grain and size (grain_layer.h), and verify.
struct DedupOptions : GrainOptions {
  bool verify = false;
};

// Bytes of dedup table pages that hold `mapped_grains` map entries and `unique_grains` grain
// records (what `vstack space` reports as dedup metadata).
uint64_t DedupMetadataBytes(uint64_t mapped_grains, uint64_t unique_grains);

// Parses the options of a dedup spec part (shared with `vstack space`).
Result<DedupOptions> ParseDedupOptions(const OptionValues& values, uint64_t lower_size);

class DedupDevice final : public MappedLayer<DedupEngine> {
 public:
  // Opens the dedup metadata on `lower`, formatting a blank device if it is fresh or
  // options.format (format=on) is given, else refusing it (OpenSuperblock); read-only, a blank
  // device is presented as empty without writing anything.
  static Result<DevicePtr> Open(DevicePtr lower, const DedupOptions& options, bool read_only);

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  std::optional<SpaceUsage> Space() const override;
  // Reference counts against the map (as stored and in memory), the allocator and the index,
  // then every used grain's content against its fingerprint.
  Status Check(CheckMode mode, CheckResult* out) override;

  bool verify() const { return verify_; }

  enum Counter : size_t {
    kDedupHits,
    kUniqueWrites,
    kZeroGrains,
    kRmwReads,
    kVerifyReads,
    kCollisions,
    kRetries,
    kCommits,
    kDiscards,  // discard requests sent below (runs of freed units)
    kDiscardedBytes,
    kCounterCount
  };
  // MappedLayer counts discards in the two counters after kCommits.
  static_assert(kDiscards == kCommits + 1 && kDiscardedBytes == kCommits + 2);

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;

 private:
  DedupDevice(DevicePtr lower, uint32_t grain, bool verify, uint64_t size,
              uint64_t physical_grains, std::unique_ptr<MetaStore> store, uint64_t data_offset,
              bool read_only);

  const bool verify_;
};

// The queue of a DedupDevice (dedup_queue.cc).
std::unique_ptr<IoQueue> NewDedupQueue(DedupDevice& device, std::unique_ptr<IoQueue> lower);

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_DEDUP_DEDUP_DEVICE_H_
