// zstd: per-grain compression with libzstd, with a policy for the stored size.
//
// Spec: zstd[:level=1,grain=4K,rule=sector|vsan-osa|packed|min-saving=P,open_bins=16,size=N,
//            format=on]+<lower>
//
// What zstd adds to the grain engine (blockdev/grainmap/grain_device.h): each grain it writes
// is compressed on its own (grain_codec.h, on the writing queue's thread) and sized by the
// stored-size rule (size_rule.h). A grain that does not shrink under the rule is stored raw, in
// a unit (a bin) of its own, like any grain layer's; a compressed one becomes a fragment that
// the queue packs (packing_queue.h) into a bin with others, best fit among its `open_bins` bins
// (bin_packer.h). A map entry names the fragment: {bin, offset, length}. Reads decompress.
// The map, reference counts (fragments per bin), copy-on-write reuse of bins, read-modify-
// write, placement of raw grains, commits, discards and check are the engine's. See
// docs/layers/zstd.md.
#ifndef VSTACK_BLOCKDEV_ZSTD_ZSTD_DEVICE_H_
#define VSTACK_BLOCKDEV_ZSTD_ZSTD_DEVICE_H_

#include <memory>

#include "blockdev/grainmap/grain_device.h"
#include "blockdev/zstd/size_rule.h"

namespace vstack {

// grain, size and format (grain_layer.h), level, rule and the packer's open bins per queue.
struct ZstdOptions : GrainOptions {
  static constexpr uint32_t kMaxOpenBins = 64;
  int level = 1;
  SizeRule rule;
  bool rule_given = false;
  uint32_t open_bins = 16;
};

// Parses the options of a zstd spec part (shared with `vstack space`).
Result<ZstdOptions> ParseZstdOptions(const OptionValues& values, uint64_t lower_size);

// Where a grain's bytes are (the engine's Location): `length` compressed bytes at `offset` of
// bin `unit`, or (length 0) the whole bin, raw. As a map entry: (bin + 2) | offset << 32 |
// length << 48.
inline uint64_t FragmentEntry(uint64_t bin, uint32_t offset, uint32_t length) {
  return UnitMap::EntryOf(bin) | uint64_t{offset} << 32 | uint64_t{length} << 48;
}
inline Location FragmentOf(uint64_t entry) {
  return {UnitMap::UnitOf(entry), static_cast<uint32_t>((entry >> 32) & 0xFFFF),
          static_cast<uint32_t>(entry >> 48)};
}

class ZstdDevice final : public GrainDevice {
 public:
  // The format: an 8-byte map entry per virtual grain; per bin, 4 bytes that version 1 used
  // for its live fragment count (now derived from the map at open; version 1 images are
  // migrated on their first writable open), left zero.
  static const GrainFormat kFormat;

  static Result<DevicePtr> Open(DevicePtr lower, const ZstdOptions& options, bool read_only);

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  std::optional<SpaceUsage> Space() const override;
  // The space figures of virtual bytes [offset, offset+length) only (grain-aligned), e.g. the
  // data area of a dedup layer above, without its metadata.
  std::optional<SpaceUsage> SpaceOf(uint64_t offset, uint64_t length) const override;

  int level() const { return level_; }
  uint32_t open_bins() const { return open_bins_; }
  const SizeRule& rule() const { return rule_; }

  enum Counter : size_t {
    kCompressed = kBaseCounters,
    kStoredRaw,
    kDecompressErrors,
    kSealedBins,       // bins the packer closed (full, to make room, or at the queue's close)
    kSealedFreeBytes,  // the bytes they left unused
    kTailReads,        // lower blocks read back to add to a hole (bin_packer.h)
  };

 private:
  ZstdDevice(DevicePtr lower, const Header& h, const ZstdOptions& o,
             std::unique_ptr<MetaStore> store, uint64_t data_offset, bool read_only);

  // The policy (grain_device.h).
  std::unique_ptr<QueueState> NewQueueState(GrainIo& io) override;
  bool EncodesToScratch() const override { return true; }
  Encoded Encode(QueueState* qs, const GrainWrite& w, const std::byte* bytes) override;
  void Pack(QueueState* qs, GrainIo& io, std::span<void* const> grains,
            std::span<const std::byte* const> bytes, std::span<const Encoded> e) override;
  Location Locate(uint64_t entry) const override;
  bool Decode(QueueState* qs, const std::byte* stored, uint32_t length, std::byte* out) override;
  std::string BadEntry(uint64_t entry) const override;
  void CheckMore(CheckMode mode, CheckResult* out) override;
  ScrubFinding ScrubGrain(uint64_t grain, uint64_t entry, const std::byte* stored, uint32_t length,
                          CheckMode mode) override;

  // The figures of grains [first, first+count) (Space and SpaceOf).
  SpaceUsage Figures(uint64_t first, uint64_t count) const;

  const int level_;
  const uint32_t open_bins_;
  const SizeRule rule_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_ZSTD_ZSTD_DEVICE_H_
