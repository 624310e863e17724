#include "blockdev/zstd/size_rule.h"

#include <cmath>
#include <cstdlib>

namespace vstack {
namespace {

constexpr uint32_t kSector = 512;
// The rules without a parameter, by Kind.
constexpr const char* kNames[] = {"vsan-osa", "sector", "packed"};

uint32_t RoundUp(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

}  // namespace

Result<SizeRule> ParseSizeRule(std::string_view text) {
  SizeRule r;
  for (uint8_t k = 0; k < SizeRule::kMinSaving; ++k) {
    if (text == kNames[k]) {
      r.kind = static_cast<SizeRule::Kind>(k);
      return r;
    }
  }
  if (text.substr(0, 11) != "min-saving=") {
    return MakeError(Errc::kInvalidArgument, "rule '" + std::string(text) +
                                                 "' is not one of: vsan-osa, sector, packed, "
                                                 "min-saving=P");
  }
  const std::string pct(text.substr(11));
  char* end = nullptr;
  const double p = std::strtod(pct.c_str(), &end);
  // Kept in basis points: a value with more than two decimals would be rounded into one that
  // was not asked for (99.999 into 100, which is not even valid), so it is refused.
  const double bp = p * 100;
  if (pct.empty() || *end != '\0' || !(p >= 0) || p >= 100 ||
      std::fabs(bp - std::round(bp)) > 1e-6) {
    return MakeError(Errc::kInvalidArgument,
                     "rule 'min-saving=" + pct +
                         "': expected a percentage from 0 to below 100, in steps of 0.01");
  }
  r.kind = SizeRule::kMinSaving;
  r.min_saving_bp = static_cast<uint32_t>(std::lround(bp));
  return r;
}

std::string FormatSizeRule(const SizeRule& rule) {
  if (rule.kind < SizeRule::kMinSaving) return kNames[rule.kind];
  if (rule.kind > SizeRule::kMinSaving) return "?";
  // "12.50" -> "12.5", "12.00" -> "12".
  char pct[16];
  std::snprintf(pct, sizeof pct, "%u.%02u", rule.min_saving_bp / 100, rule.min_saving_bp % 100);
  std::string s = pct;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return "min-saving=" + s;
}

StoredForm ApplySizeRule(const SizeRule& rule, uint32_t grain, uint32_t compressed) {
  const StoredForm raw{false, grain};
  if (compressed == 0 || compressed >= grain) return raw;
  switch (rule.kind) {
    case SizeRule::kVsanOsa:
      return compressed <= grain / 2 ? StoredForm{true, grain / 2} : raw;
    case SizeRule::kPacked:
      return StoredForm{true, compressed};
    case SizeRule::kMinSaving:
      // Keep it if compressed <= grain * (1 - P/100), as ZFS's d_len test, in integer math;
      // then as sector.
      if (uint64_t{compressed} * 10000 > uint64_t{grain} * (10000 - rule.min_saving_bp)) return raw;
      [[fallthrough]];
    case SizeRule::kSector: {
      const uint32_t slot = RoundUp(compressed, kSector);
      return slot < grain ? StoredForm{true, slot} : raw;
    }
  }
  return raw;
}

}  // namespace vstack
