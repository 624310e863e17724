#include "lib/duration.h"

#include <cmath>
#include <cstdlib>

namespace vstack {

Result<uint64_t> ParseDuration(const std::string& text, BareNumber bare) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = end ? end : "";
  double scale = -1;
  if (unit == "ns") scale = 1;
  if (unit == "us" || unit == "µs") scale = 1e3;
  if (unit == "ms") scale = 1e6;
  if (unit == "s") scale = 1e9;
  if (unit == "m" || unit == "min") scale = 60e9;
  if (unit.empty()) scale = bare == BareNumber::kSeconds ? 1e9 : v == 0 ? 0 : -1;
  if (end == text.c_str() || scale < 0 || !std::isfinite(v)) {
    return MakeError(Errc::kInvalidArgument,
                     "'" + text + "' is not a duration (e.g. 5ms, 80us, 1.5s, 0)");
  }
  if (v < 0) return MakeError(Errc::kInvalidArgument, "'" + text + "' is negative");
  if (v * scale > kMaxDurationNs) {
    return MakeError(Errc::kInvalidArgument,
                     "'" + text + "' is too long: at most 1000000s (about 11.6 days)");
  }
  return static_cast<uint64_t>(std::llround(v * scale));
}

}  // namespace vstack
