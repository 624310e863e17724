#include "blockdev/emulation/service_time.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "lib/duration.h"

namespace vstack {

Result<uint64_t> ParseDurationNs(const std::string& text) {
  return ParseDuration(text, BareNumber::kZeroOnly);
}

std::string FormatDurationNs(double ns) {
  const char* unit = "ns";
  double v = ns;
  if (ns >= 1e9) {
    v = ns / 1e9, unit = "s";
  } else if (ns >= 1e6) {
    v = ns / 1e6, unit = "ms";
  } else if (ns >= 1e3) {
    v = ns / 1e3, unit = "us";
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%g%s", v, unit);
  return buf;
}

ServiceTime ServiceTime::Fixed(uint64_t ns) {
  ServiceTime t;
  t.a_ = double(ns);
  return t;
}

Result<ServiceTime> ServiceTime::Parse(const std::string& what, const std::string& text) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string::npos ? colon : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  auto bad = [&](const std::string& why) {
    return MakeError(Errc::kInvalidArgument,
                     what + ": '" + text + "' " + why +
                         " (forms: 5ms, uniform:MIN:MAX, lognormal:MEAN:SD, exp:MEAN)");
  };
  std::vector<double> v;
  for (size_t i = parts.size() == 1 ? 0 : 1; i < parts.size(); ++i) {
    auto ns = ParseDurationNs(parts[i]);
    if (!ns) return bad("has a bad duration: " + ns.error().message);
    v.push_back(double(*ns));
  }
  ServiceTime t;
  const std::string kind = parts.size() == 1 ? "fixed" : parts[0];
  if (kind == "fixed" && v.size() == 1) {
    t.a_ = v[0];
  } else if (kind == "uniform" && v.size() == 2) {
    if (v[1] < v[0]) return bad("has MAX below MIN");
    t.kind_ = Kind::kUniform;
    t.a_ = v[0];
    t.b_ = v[1];
  } else if (kind == "lognormal" && v.size() == 2) {
    if (v[0] <= 0) return bad("needs a mean above 0");
    t.kind_ = Kind::kLogNormal;
    t.a_ = v[0];
    t.b_ = v[1];
    // For mean m and standard deviation s: sigma^2 = ln(1 + s^2/m^2), mu = ln m - sigma^2/2.
    const double s2 = std::log1p((v[1] * v[1]) / (v[0] * v[0]));
    t.sigma_ = std::sqrt(s2);
    t.mu_ = std::log(v[0]) - s2 / 2;
  } else if (kind == "exp" && v.size() == 1) {
    t.kind_ = Kind::kExponential;
    t.a_ = v[0];
  } else {
    return bad("is not a distribution");
  }
  return t;
}

uint64_t ServiceTime::Draw(TimingRng& rng) const {
  double ns = a_;
  switch (kind_) {
    case Kind::kFixed:
      break;
    case Kind::kUniform:
      ns = a_ + (b_ - a_) * rng.Unit();
      break;
    case Kind::kLogNormal: {
      // Box-Muller: one standard normal from two uniforms.
      const double z = std::sqrt(-2 * std::log(rng.Unit())) * std::cos(2 * M_PI * rng.Unit());
      ns = std::exp(mu_ + sigma_ * z);
      break;
    }
    case Kind::kExponential:
      ns = -a_ * std::log(rng.Unit());
      break;
  }
  return static_cast<uint64_t>(std::llround(std::min(ns, 1e15)));
}

double ServiceTime::mean_ns() const { return kind_ == Kind::kUniform ? (a_ + b_) / 2 : a_; }

std::string ServiceTime::ToString() const {
  switch (kind_) {
    case Kind::kFixed:
      return FormatDurationNs(a_);
    case Kind::kUniform:
      return "uniform:" + FormatDurationNs(a_) + ":" + FormatDurationNs(b_);
    case Kind::kLogNormal:
      return "lognormal:" + FormatDurationNs(a_) + ":" + FormatDurationNs(b_);
    case Kind::kExponential:
      return "exp:" + FormatDurationNs(a_);
  }
  return "";
}

}  // namespace vstack
