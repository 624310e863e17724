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

namespace {

// "0=1ms/50=6.5ms/100=175ms" -> (percentile, ns) points, from 0 to 100, both increasing;
// "" when fine, else what is wrong.
std::string ParsePercentileTable(const std::string& text,
                                 std::vector<std::pair<double, double>>* out) {
  for (size_t start = 0; start <= text.size();) {
    size_t slash = text.find('/', start);
    if (slash == std::string::npos) slash = text.size();
    const std::string item = text.substr(start, slash - start);
    const size_t eq = item.find('=');
    char* end = nullptr;
    const double p = eq == std::string::npos ? NAN : std::strtod(item.c_str(), &end);
    if (eq == std::string::npos || end != item.c_str() + eq || !(p >= 0 && p <= 100)) {
      return "has '" + item + "' where PERCENTILE=DURATION was expected (e.g. 50=6.5ms)";
    }
    auto ns = ParseDurationNs(item.substr(eq + 1));
    if (!ns) return "has a bad duration: " + ns.error().message;
    if (!out->empty() && (p <= out->back().first || double(*ns) < out->back().second)) {
      return "is not increasing at '" + item + "' (percentiles and durations must both grow)";
    }
    out->emplace_back(p, double(*ns));
    start = slash + 1;
  }
  if (out->size() < 2 || out->front().first != 0 || out->back().first != 100) {
    return "must run from percentile 0 to 100 (e.g. 0=1ms/50=6ms/100=80ms)";
  }
  if (out->front().second <= 0) return "needs a value above 0 at percentile 0";
  return "";
}

// The value at fraction t in [0, 1] of the way from a to b, log-linear.
double LogLinear(double a, double b, double t) { return a * std::pow(b / a, t); }

}  // namespace

Result<ServiceTime> ServiceTime::Parse(const std::string& what, const std::string& text) {
  auto bad = [&](const std::string& why) {
    return MakeError(Errc::kBadSpec,
                     what + ": '" + text + "' " + why +
                         " (forms: 5ms, uniform:MIN:MAX, lognormal:MEAN:SD, exp:MEAN, "
                         "pct:P=DURATION/.../100=DURATION)");
  };
  if (text.rfind("pct:", 0) == 0) {
    ServiceTime t;
    t.kind_ = Kind::kPercentiles;
    if (std::string why = ParsePercentileTable(text.substr(4), &t.table_); !why.empty()) {
      return bad(why);
    }
    return t;
  }
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string::npos ? colon : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
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
    case Kind::kPercentiles: {
      const double p = 100 * rng.Unit();
      size_t i = 1;
      while (i + 1 < table_.size() && table_[i].first < p) ++i;
      const auto& [p0, v0] = table_[i - 1];
      const auto& [p1, v1] = table_[i];
      ns = LogLinear(v0, v1, (p - p0) / (p1 - p0));
      break;
    }
  }
  return static_cast<uint64_t>(std::llround(std::min(ns, 1e15)));
}

double ServiceTime::mean_ns() const {
  if (kind_ == Kind::kUniform) return (a_ + b_) / 2;
  if (kind_ != Kind::kPercentiles) return a_;
  // Each segment's mean of a log-linear ramp from v0 to v1: (v1 - v0) / ln(v1 / v0).
  double mean = 0;
  for (size_t i = 1; i < table_.size(); ++i) {
    const auto& [p0, v0] = table_[i - 1];
    const auto& [p1, v1] = table_[i];
    mean += (v1 == v0 ? v0 : (v1 - v0) / std::log(v1 / v0)) * (p1 - p0) / 100;
  }
  return mean;
}

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
    case Kind::kPercentiles: {
      std::string s = "pct:";
      for (const auto& [p, v] : table_) {
        char pct[32];
        std::snprintf(pct, sizeof pct, "%g=", p);
        s += (s.size() > 4 ? "/" : "") + std::string(pct) + FormatDurationNs(v);
      }
      return s;
    }
  }
  return "";
}

}  // namespace vstack
