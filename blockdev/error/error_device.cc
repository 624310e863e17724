#include "blockdev/error/error_device.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "blockdev/emulation/service_time.h"
#include "lib/registry.h"
#include "lib/suggest.h"

namespace vstack {
namespace {

struct OpName_ {
  const char* name;
  Op op;
};
constexpr OpName_ kOps[] = {{"read", Op::kRead},
                            {"write", Op::kWrite},
                            {"zero", Op::kWriteZeroes},
                            {"flush", Op::kFlush},
                            {"trim", Op::kDiscard}};
constexpr uint32_t Bit(Op op) { return 1u << static_cast<int>(op); }

struct Errno {
  const char* name;
  int value;
};
constexpr Errno kErrnos[] = {
    {"EIO", EIO},       {"ENOSPC", ENOSPC},       {"EPERM", EPERM},         {"ENOMEM", ENOMEM},
    {"EINVAL", EINVAL}, {"ESHUTDOWN", ESHUTDOWN}, {"ETIMEDOUT", ETIMEDOUT}, {"EROFS", EROFS},
    {"EDQUOT", EDQUOT}};

// The values ops= takes, for its errors.
constexpr const char* kOpsAllowed =
    "read, write, zero, flush, trim joined with '/' (read/write), or all";

// "error: option 'KEY': WHY", as every layer's bad option value reads (BadOptionValue).
Error BadValue(std::string_view key, const std::string& why) {
  return BadOptionValue("error", key, why);
}

Result<uint32_t> ParseOps(const std::string& text) {
  if (text == "all")
    return Bit(Op::kRead) | Bit(Op::kWrite) | Bit(Op::kWriteZeroes) | Bit(Op::kFlush) |
           Bit(Op::kDiscard);
  if (text.empty())
    return BadValue("ops", std::string("an empty value is not one of ") + kOpsAllowed);
  std::vector<std::string> names;
  for (const OpName_& o : kOps) names.push_back(o.name);
  uint32_t bits = 0;
  for (size_t start = 0; start <= text.size();) {
    size_t slash = text.find('/', start);
    if (slash == std::string::npos) slash = text.size();
    const std::string word = text.substr(start, slash - start);
    if (word.empty()) {
      return BadValue("ops", "'" + text + "' has an empty kind; give " + kOpsAllowed);
    }
    if (word == "all") {
      return BadValue("ops", "'" + text + "': all (every kind) stands alone; give all, or " +
                                 "kinds joined with '/' (read/write)");
    }
    bool known = false;
    for (const OpName_& o : kOps) {
      if (word == o.name) bits |= Bit(o.op), known = true;
    }
    if (!known) {
      return BadValue("ops", "'" + word + "'" + (word == text ? "" : " in '" + text + "'") +
                                 " is not one of " + kOpsAllowed + DidYouMean(word, names));
    }
    start = slash + 1;
  }
  return bits;
}

Result<int> ParseErrno(const std::string& text) {
  for (const Errno& e : kErrnos) {
    if (text == e.name) return e.value;
  }
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (end != text.c_str() && *end == '\0' && v > 0 && v < 4096) return static_cast<int>(v);
  std::string names;
  for (const Errno& e : kErrnos) names += (names.empty() ? "" : ", ") + std::string(e.name);
  return BadValue("errno",
                  "'" + text + "' is not an errno number from 1 to 4095 or one of " + names);
}

Result<DevicePtr> OpenError(DevicePtr lower, const OptionValues& o, const OpenOptions&) {
  ErrorConfig c;
  VSTACK_ASSIGN_OR_RETURN(c.ops, ParseOps(o.Get("ops")));
  VSTACK_ASSIGN_OR_RETURN(c.error, ParseErrno(o.Get("errno")));
  const std::string rate = o.Get("rate");
  char* end = nullptr;
  c.rate = std::strtod(rate.c_str(), &end);
  if (end == rate.c_str() || *end != '\0' || !(c.rate >= 0 && c.rate <= 1)) {
    return BadValue("rate", "'" + rate + "' is not a probability from 0 to 1");
  }
  VSTACK_ASSIGN_OR_RETURN(int64_t after, o.Int("after", 0, INT64_MAX));
  VSTACK_ASSIGN_OR_RETURN(int64_t count, o.Int("count", 0, INT64_MAX));
  VSTACK_ASSIGN_OR_RETURN(c.offset, o.Size("offset"));
  VSTACK_ASSIGN_OR_RETURN(c.length, o.Size("length"));
  VSTACK_ASSIGN_OR_RETURN(c.seed, SeedOption(o));
  // A range no request can reach injects nothing: a typo, not an experiment. (A device that
  // can grow, a file under a dynamic VHD, may be written past its size of now.)
  const uint64_t size = lower->size_bytes();
  if (c.offset >= size && !lower->Has(kCapResizable)) {
    return MakeError(Errc::kBadSpec, "error: offset=" + o.Get("offset") +
                                         " is not inside the device below (" +
                                         std::to_string(size) + " bytes): no request could fail");
  }
  if (c.length > UINT64_MAX - c.offset) {
    return MakeError(Errc::kBadSpec, "error: offset=" + o.Get("offset") +
                                         " and length=" + o.Get("length") + " end past 2^64 bytes");
  }
  c.after = static_cast<uint64_t>(after);
  c.count = static_cast<uint64_t>(count);
  return MakeDevice<ErrorDevice>(std::move(lower), c);
}

ComponentInfo ErrorComponent() {
  return LayerComponent(
      "error",
      "fault injection (blkdebug, nbdkit error filter): fail chosen requests with an errno",
      {
          {"ops", "which requests may fail: read, write, zero, flush, trim joined by '/', or all",
           "all"},
          {"errno",
           "the error: EIO, ENOSPC, EPERM, ENOMEM, EINVAL, ESHUTDOWN, ETIMEDOUT, EROFS, "
           "EDQUOT or a number",
           "EIO"},
          {"rate", "probability that a matching request fails, 0..1", "1"},
          {"after", "the first N matching requests succeed", "0"},
          {"count", "at most N requests fail (0: no limit)", "0"},
          {"offset", "only requests overlapping [offset, offset+length) match (flushes always do)",
           "0"},
          {"length", "length of that range (0: to the end of the device)", "0"},
          {"seed", "seed of the rate draws", "1"},
      },
      &OpenError);
}

}  // namespace

ErrorDevice::ErrorDevice(DevicePtr lower, ErrorConfig config)
    : EmulationLayer("error", std::move(lower), config, SystemClock()) {
  DeclareCounters({"matched", "failed"});
}

bool ErrorDevice::ShouldFail(const IoRequest& req) {
  const ErrorConfig& c = config();
  if ((c.ops & Bit(req.op)) == 0) return false;
  if (req.op != Op::kFlush) {
    const uint64_t end = c.length == 0 ? UINT64_MAX : c.offset + c.length;
    if (req.offset + req.length <= c.offset || req.offset >= end) return false;
  }
  const uint64_t k = matched_.fetch_add(1) + 1;
  CountShared(kMatched);
  if (k <= c.after) return false;
  if (c.count != 0 && k > c.after + c.count) return false;
  if (c.rate >= 1) return true;
  TimingRng draw(c.seed ^ (k * 0x9e3779b97f4a7c15ull));
  return draw.Unit() < c.rate;
}

std::string ErrorDevice::Describe() const {
  std::string ops;
  for (const OpName_& o : kOps) {
    if (config().ops & Bit(o.op)) ops += (ops.empty() ? "" : "/") + std::string(o.name);
  }
  return "error " + ops + " -> " + std::strerror(config().error);
}

void ErrorDevice::Properties(PropertyList& out) const {
  out.push_back({"errno", int64_t{config().error}, ""});
  out.push_back({"rate", config().rate, ""});
  out.push_back({"after", config().after, ""});
  out.push_back({"matched", matched_.load(), ""});
}

std::error_code ErrorDevice::Refuse(const IoRequest& req) {
  if (!ShouldFail(req)) return NoError();
  CountShared(kFailed);
  return SystemError(config().error);
}

std::unique_ptr<ForwardingQueue> ErrorDevice::NewQueue(std::unique_ptr<IoQueue> lower) {
  return std::make_unique<RefusingQueue<ErrorDevice>>(*this, std::move(lower));
}

VSTACK_REGISTER_COMPONENT(error, ErrorComponent());

}  // namespace vstack
