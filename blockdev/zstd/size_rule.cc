#include "blockdev/zstd/size_rule.h"

#include <cmath>
#include <cstdlib>

namespace vstack {
namespace {

constexpr uint32_t kSector = 512;

uint32_t RoundUp(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

}  // namespace

Result<SizeRule> ParseSizeRule(std::string_view text) {
  SizeRule r;
  if (text == "vsan-osa") {
    r.kind = SizeRule::kVsanOsa;
  } else if (text == "sector") {
    r.kind = SizeRule::kSector;
  } else if (text == "packed") {
    r.kind = SizeRule::kPacked;
  } else if (text.substr(0, 11) == "min-saving=") {
    const std::string pct(text.substr(11));
    char* end = nullptr;
    const double p = std::strtod(pct.c_str(), &end);
    // Kept in basis points: a value with more than two decimals would be rounded into one
    // that was not asked for (99.999 into 100, which is not even valid), so it is refused.
    const double bp = p * 100;
    if (pct.empty() || *end != '\0' || !(p >= 0) || p >= 100 ||
        std::fabs(bp - std::round(bp)) > 1e-6) {
      return MakeError(Errc::kInvalidArgument,
                       "rule 'min-saving=" + pct +
                           "': expected a percentage from 0 to below 100, in steps of 0.01");
    }
    r.kind = SizeRule::kMinSaving;
    r.min_saving_bp = static_cast<uint32_t>(std::lround(bp));
  } else {
    return MakeError(Errc::kInvalidArgument, "rule '" + std::string(text) +
                                                 "' is not one of: vsan-osa, sector, packed, "
                                                 "min-saving=P");
  }
  return r;
}

std::string FormatSizeRule(const SizeRule& rule) {
  switch (rule.kind) {
    case SizeRule::kVsanOsa: return "vsan-osa";
    case SizeRule::kSector: return "sector";
    case SizeRule::kPacked: return "packed";
    case SizeRule::kMinSaving: {
      std::string s = std::to_string(rule.min_saving_bp / 100);
      if (rule.min_saving_bp % 100) {
        char frac[8];
        std::snprintf(frac, sizeof frac, ".%02u", rule.min_saving_bp % 100);
        s += frac;
        while (s.back() == '0') s.pop_back();
      }
      return "min-saving=" + s;
    }
  }
  return "?";
}

StoredForm ApplySizeRule(const SizeRule& rule, uint32_t grain, uint32_t compressed) {
  const StoredForm raw{false, grain};
  if (compressed == 0 || compressed >= grain) return raw;
  switch (rule.kind) {
    case SizeRule::kVsanOsa:
      return compressed <= grain / 2 ? StoredForm{true, grain / 2} : raw;
    case SizeRule::kSector: {
      const uint32_t slot = RoundUp(compressed, kSector);
      return slot < grain ? StoredForm{true, slot} : raw;
    }
    case SizeRule::kPacked:
      return StoredForm{true, compressed};
    case SizeRule::kMinSaving: {
      // Keep it if compressed <= grain * (1 - P/100), as ZFS's d_len test, in integer math.
      if (uint64_t{compressed} * 10000 > uint64_t{grain} * (10000 - rule.min_saving_bp)) return raw;
      const uint32_t slot = RoundUp(compressed, kSector);
      return slot < grain ? StoredForm{true, slot} : raw;
    }
  }
  return raw;
}

}  // namespace vstack
