// zstd: per-grain compression with libzstd, with a policy for the stored size.
//
// Spec: zstd[:level=1,grain=4K,rule=sector|vsan-osa|packed|min-saving=P,open_bins=16,size=N]
//       +<lower>
//
// Each grain (4 KiB by default, up to 64 KiB) is compressed on its own; a partial-grain write is
// a read-modify-write. An all-zero grain is a map entry and costs nothing. A grain that does not
// compress, or that the stored-size rule (size_rule.h) does not keep compressed, is stored raw
// in a bin of its own; compressed fragments are packed into bins, best fit among up to
// `open_bins` open bins per queue (bin_packer.h).
// Compression runs on the caller's thread, so queues on several threads compress in parallel.
// Metadata (map, bin table, journal) lives at the start of the device below. See
// docs/layers/zstd.md.
#ifndef VSTACK_BLOCKDEV_ZSTD_ZSTD_DEVICE_H_
#define VSTACK_BLOCKDEV_ZSTD_ZSTD_DEVICE_H_

#include <memory>

#include "blockdev/grainmap/mapped_layer.h"
#include "blockdev/zstd/size_rule.h"
#include "blockdev/zstd/zstd_engine.h"

namespace vstack {

// grain and size (grain_layer.h), level, rule and the packer's open bins per queue.
struct ZstdOptions : GrainOptions {
  static constexpr uint32_t kMaxOpenBins = 64;
  int level = 1;
  SizeRule rule;
  bool rule_given = false;
  uint32_t open_bins = 16;
};

// Bytes of zstd table pages that map `stored_grains` grains into `bins` bins (what
// `vstack space` reports as compression metadata).
uint64_t ZstdMetadataBytes(uint64_t stored_grains, uint64_t bins);

// Parses the options of a zstd spec part (shared with `vstack space`).
Result<ZstdOptions> ParseZstdOptions(const OptionValues& values, uint64_t lower_size);

class ZstdDevice final : public MappedLayer<ZstdEngine> {
 public:
  // Opens the zstd metadata on `lower`, formatting a blank device if it is fresh or
  // options.format (format=on) is given, else refusing it (OpenSuperblock); read-only, a blank
  // device is presented as empty without writing anything.
  static Result<DevicePtr> Open(DevicePtr lower, const ZstdOptions& options, bool read_only);

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  std::optional<SpaceUsage> Space() const override;
  // Live counts against the map, overlapping fragments, lost bins; then every fragment is
  // decompressed.
  Status Check(CheckMode mode, CheckResult* out) override;

  // The space figures of virtual bytes [offset, offset+length) only (grain-aligned), e.g. the
  // data area of a dedup layer above, without its metadata.
  std::optional<SpaceUsage> SpaceOf(uint64_t offset, uint64_t length) const override;

  int level() const { return level_; }
  // Open bins per queue the packer chooses from (not stored: may change at every open).
  uint32_t open_bins() const { return open_bins_; }
  const SizeRule& rule() const { return engine().rule(); }

  enum Counter : size_t {
    kCompressed,
    kStoredRaw,
    kZeroGrains,
    kRmwReads,
    kDecompressErrors,
    kRetries,
    kCommits,
    kDiscards,  // discard requests sent below (runs of freed units)
    kDiscardedBytes,
    kSealedBins,       // bins the packer closed (full, to make room, or at the queue's close)
    kSealedFreeBytes,  // the bytes they left unused
    kTailReads,        // lower blocks read back to add to a hole (bin_packer.h)
  };
  // MappedLayer counts discards in the two counters after kCommits.
  static_assert(kDiscards == kCommits + 1 && kDiscardedBytes == kCommits + 2);

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;

 private:
  ZstdDevice(DevicePtr lower, const ZstdOptions& o, uint64_t bins,
             std::unique_ptr<MetaStore> store, uint64_t data_offset, bool read_only);

  const int level_;
  const uint32_t open_bins_;
};

// The queue of a ZstdDevice (zstd_queue.cc).
std::unique_ptr<IoQueue> NewZstdQueue(ZstdDevice& device, std::unique_ptr<IoQueue> lower);

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_ZSTD_ZSTD_DEVICE_H_
