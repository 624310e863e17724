// The knobs of vstack space and their check (space_knobs.h).
#include "analysis/space/space_knobs.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "analysis/space/space_estimate.h"
#include "lib/size.h"
#include "lib/suggest.h"

namespace vstack {
namespace {

Error Bad(const std::string& message) { return MakeError(Errc::kInvalidArgument, message); }

// The words of the command line's choice check (tools/usage.h, Choices): "--dedup: 'x' is not
// one of on|off", with a suggestion when one is close.
Status OneOf(const std::string& flag, const std::string& value,
             const std::vector<std::string>& choices) {
  std::string list;
  for (const std::string& c : choices) {
    if (value == c) return OkStatus();
    list += (list.empty() ? "" : "|") + c;
  }
  return Bad(flag + ": '" + value + "' is not one of " + list + DidYouMean(value, choices));
}

}  // namespace

Result<double> ParseFraction(const std::string& flag, const std::string& text) {
  std::string t = text;
  double scale = 1;
  if (!t.empty() && t.back() == '%') {
    t.pop_back();
    scale = 100;
  }
  char* end = nullptr;
  const double v = t.empty() ? 0 : std::strtod(t.c_str(), &end) / scale;
  if (t.empty() || *end != '\0' || !(v > 0) || v > 1) {
    return Bad(flag + " " + text + ": expected a fraction such as 1% or 0.01, above 0, at most 1");
  }
  return v;
}

Result<SpaceOptions> SpaceOptionsFrom(const SpaceKnobs& a) {
  SpaceOptions o;
  VSTACK_RETURN_IF_ERROR(ParseScope(a.scope, &o));
  auto grain = ParseSize(a.grain);
  if (!grain) return Annotate(std::move(grain).error(), "--grain");
  if (*grain < 4096 || *grain > 65536 || (*grain & (*grain - 1))) {
    return Bad("--grain " + a.grain + ": not a power of two from 4K to 64K");
  }
  o.grain = static_cast<uint32_t>(*grain);
  VSTACK_RETURN_IF_ERROR(OneOf("--dedup", a.dedup, {"on", "off"}));
  o.dedup = a.dedup == "on";
  VSTACK_RETURN_IF_ERROR(ParseCodec(a.codec, &o));
  auto rule = ParseSizeRule(a.rule);
  if (!rule) return Annotate(std::move(rule).error(), "--rule");
  o.rule = *rule;
  VSTACK_RETURN_IF_ERROR(ParseProtection(a.protection, &o));
  VSTACK_RETURN_IF_ERROR(OneOf("--checksum", a.checksum, {"on", "off"}));
  o.checksum = a.checksum == "on";
  VSTACK_RETURN_IF_ERROR(OneOf("--mode", a.mode, {"scan", "replay", "ceph"}));
  o.mode = a.mode == "replay" ? SpaceOptions::Mode::kReplay
           : a.mode == "ceph" ? SpaceOptions::Mode::kCeph
                              : SpaceOptions::Mode::kScan;
  if (o.mode != SpaceOptions::Mode::kCeph && !a.ceph.pools.empty()) {
    return Bad("--pool needs --mode=ceph");
  }
  if (o.mode == SpaceOptions::Mode::kCeph && a.ceph.pools.empty()) {
    return Bad("--mode=ceph needs the pools to measure: --pool POOL (repeatable)");
  }
  // One reader per thread and a buffer each: more than this is a typo, not a machine.
  if (a.threads > 1024) return Bad("--threads " + std::to_string(a.threads) + ": at most 1024");
  o.threads = a.threads;
  o.seed = a.seed;
  auto confidence = ParseFraction("--confidence", a.confidence);
  if (!confidence || *confidence >= 1) {
    return Bad("--confidence " + a.confidence + ": expected a level such as 95%, below 100%");
  }
  o.confidence = *confidence;
  const bool sampling = !a.fraction.empty() || !a.accuracy.empty() || !a.sketch.empty();
  if (sampling && !a.estimate) return Bad("--fraction, --accuracy and --sketch need --estimate");
  if (!a.estimate) return o;
  o.estimate = true;
  if (o.mode != SpaceOptions::Mode::kScan) {
    return Bad("--estimate and --mode=" + a.mode + " do not go together");
  }
  if (!a.fraction.empty() && !a.accuracy.empty()) return Bad("give --fraction or --accuracy, not both");
  if (!a.accuracy.empty()) {
    VSTACK_ASSIGN_OR_RETURN(const double accuracy, ParseFraction("--accuracy", a.accuracy));
    o.cap = CapFor(accuracy, o.confidence);
    o.modulus = 1;
  } else {
    VSTACK_ASSIGN_OR_RETURN(const double fraction,
                            ParseFraction("--fraction", a.fraction.empty() ? "1%" : a.fraction));
    o.modulus = static_cast<uint64_t>(std::llround(1 / fraction));
  }
  return o;
}

std::string ScopeNote(const SpaceOptions& o, size_t images) {
  if (o.scope != SpaceOptions::Scope::kGroups || o.groups <= 1 || o.groups < images) return "";
  char buf[240];
  std::snprintf(buf, sizeof buf,
                "--scope groups=%u with %zu image%s puts every image in a group of its own, which "
                "is the same as --scope image",
                o.groups, images, images == 1 ? "" : "s");
  return buf;
}

}  // namespace vstack
