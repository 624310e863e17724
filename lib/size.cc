#include "lib/size.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace vstack {

Result<uint64_t> ParseSize(std::string_view text) {
  const std::string s(text);
  auto bad = [&](const std::string& why) {
    return MakeError(Errc::kInvalidArgument, "invalid size '" + s + "': " + why);
  };
  if (s.empty()) return bad("empty");
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return bad("expected a number");
  const std::string number = s.substr(0, i);
  std::string suffix = s.substr(i);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.size() >= 2 && suffix.substr(suffix.size() - 2) == "IB") {
    suffix.resize(suffix.size() - 2);
  } else if (!suffix.empty() && suffix.back() == 'B' && suffix != "B") {
    suffix.pop_back();
  } else if (suffix == "B") {
    suffix.clear();
  }
  int shift = 0;
  if (suffix.empty()) {
    shift = 0;
  } else if (suffix.size() == 1) {
    const char* kUnits = "KMGTPE";
    const char* p = std::strchr(kUnits, suffix[0]);
    if (p == nullptr) return bad("unknown suffix '" + suffix + "'");
    shift = 10 * static_cast<int>(p - kUnits + 1);
  } else {
    return bad("unknown suffix '" + suffix + "'");
  }
  if (number.find('.') != std::string::npos) {
    char* end = nullptr;
    const double v = std::strtod(number.c_str(), &end);
    if (*end != '\0' || !std::isfinite(v)) return bad("expected a number");
    const double bytes = std::ldexp(v, shift);
    if (bytes >= 18446744073709551615.0) return bad("too large");
    if (bytes != std::floor(bytes)) return bad("not a whole number of bytes");
    return static_cast<uint64_t>(bytes);
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(number.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return bad("expected a number");
  if (shift > 0 && v > (UINT64_MAX >> shift)) return bad("too large");
  return static_cast<uint64_t>(v) << shift;
}

std::string FormatSize(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else if (v == std::floor(v)) {
    std::snprintf(buf, sizeof buf, "%.0f %s", v, kUnits[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g %s", v, kUnits[u]);
  }
  return buf;
}

}  // namespace vstack
