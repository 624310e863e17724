// The stored-size rule of the compression layer: how many bytes a compressed grain occupies, or
// whether it is stored raw. The rule is a policy because real systems differ (docs/space-savings.md,
// "Sources"):
//
//   vsan-osa       keep it compressed only if it fits in half a grain; it then takes a
//                  half-grain slot (vSAN 6.2 OSA: <= 2 KiB of a 4 KiB block)
//   sector         round the compressed size up to 512 bytes (vSAN ESA-like)
//   packed         exact bytes, fragments packed into shared grain-sized bins (VDO)
//   min-saving=P   keep it compressed only if it saves at least P% (ZFS and Ceph: 12.5), then
//                  round up to 512 bytes
//
// A grain that the rule does not keep compressed is stored raw in a whole grain. The layer and
// `vstack space --mode=scan` both call ApplySizeRule, so they agree byte for byte.
#ifndef VSTACK_BLOCKDEV_ZSTD_SIZE_RULE_H_
#define VSTACK_BLOCKDEV_ZSTD_SIZE_RULE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "lib/errors.h"

namespace vstack {

struct SizeRule {
  enum Kind : uint8_t { kVsanOsa, kSector, kPacked, kMinSaving };
  Kind kind = kSector;
  uint32_t min_saving_bp = 0;  // kMinSaving: the percentage in basis points (12.5% = 1250)
  bool operator==(const SizeRule&) const = default;
};

// Parses "vsan-osa", "sector", "packed" or "min-saving=P" (P a percentage, e.g. 12.5, below 100).
Result<SizeRule> ParseSizeRule(std::string_view text);
// The canonical text of a rule ("min-saving=12.5").
std::string FormatSizeRule(const SizeRule& rule);

struct StoredForm {
  bool compressed = false;  // false: stored raw
  uint32_t slot = 0;        // bytes it occupies: the grain when raw
};

// How a grain of `grain` bytes that compresses to `compressed` bytes (0: did not compress to
// less than a grain) is stored under `rule`.
StoredForm ApplySizeRule(const SizeRule& rule, uint32_t grain, uint32_t compressed);

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_ZSTD_SIZE_RULE_H_
