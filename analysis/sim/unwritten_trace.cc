#include "analysis/sim/unwritten_trace.h"

#include <algorithm>

namespace vstack::sim {
namespace {

void Append(std::vector<ShownRun>* out, const ShownRun& run) {
  if (!out->empty()) {
    ShownRun& last = out->back();
    const bool continues = last.parent == run.parent &&
                           (!run.parent || last.parent_offset + last.length == run.parent_offset);
    if (continues && last.offset + last.length == run.offset) {
      last.length += run.length;
      return;
    }
  }
  out->push_back(run);
}

// Traces bytes [offset, offset + length) of `dev`, which the top shows from `top_offset` on.
Status Trace(const BlockDevice& dev, uint64_t offset, uint64_t length, uint64_t top_offset,
             const BlockDevice* parent, std::vector<ShownRun>* out) {
  if (&dev == parent) {
    Append(out, {top_offset, length, true, offset});
    return OkStatus();
  }
  while (length > 0) {
    if (offset >= dev.size_bytes()) {
      return MakeError(Errc::kOutOfRange, "the layer above '" + dev.Describe() +
                                              "' says it shows its bytes at offset " +
                                              std::to_string(offset) + ", past its end");
    }
    const UnwrittenOrigin o = dev.OriginOfUnwritten(offset);
    if (o.kind == UnwrittenOrigin::Kind::kUnknown || o.length == 0) {
      return MakeError(Errc::kNotSupported,
                       "'" + dev.Describe() + "' does not say what its bytes at offset " +
                           std::to_string(offset) + " hold before anything is written there");
    }
    const uint64_t n = std::min(length, o.length);
    if (o.kind == UnwrittenOrigin::Kind::kZeros) {
      Append(out, {top_offset, n, false, 0});
    } else {
      VSTACK_RETURN_IF_ERROR(Trace(*o.device, o.offset, n, top_offset, parent, out));
    }
    offset += n;
    top_offset += n;
    length -= n;
  }
  return OkStatus();
}

}  // namespace

Result<std::vector<ShownRun>> TraceUnwritten(const BlockDevice& top, const BlockDevice* parent) {
  std::vector<ShownRun> runs;
  VSTACK_RETURN_IF_ERROR(Trace(top, 0, top.size_bytes(), 0, parent, &runs));
  return runs;
}

}  // namespace vstack::sim
