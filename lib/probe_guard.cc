#include "lib/probe_guard.h"

#include <algorithm>
#include <cstring>

#include "lib/format_table.h"
#include "lib/forwarding_layer.h"
#include "lib/iovec.h"

namespace vstack {
namespace {

class ProbeGuard final : public ForwardingLayer {
 public:
  ProbeGuard(DevicePtr lower, std::vector<ProbeSignature> signatures)
      : ForwardingLayer("raw-guard", std::move(lower)), signatures_(std::move(signatures)) {}

  std::string Describe() const override { return "raw (probed: format signatures refused)"; }

  // True if writing `req` would place a signature: the bytes it writes over a signature's
  // place equal that part of the signature (a write covering only part of it is judged on
  // that part, so two writes cannot assemble one).
  bool PlacesSignature(const IoRequest& req) const {
    const uint64_t size = size_bytes();
    for (const ProbeSignature& s : signatures_) {
      const int64_t len = static_cast<int64_t>(s.bytes.size());
      const int64_t at = s.offset >= 0 ? s.offset : static_cast<int64_t>(size) + s.offset;
      if (at < 0 || at + len > static_cast<int64_t>(size)) continue;
      const uint64_t lo = std::max<uint64_t>(req.offset, static_cast<uint64_t>(at));
      const uint64_t hi =
          std::min<uint64_t>(req.offset + req.length, static_cast<uint64_t>(at + len));
      if (lo >= hi) continue;
      std::string seen(hi - lo, '\0');
      CopyFromIov(req.iov, req.iovcnt, lo - req.offset, seen.data(), seen.size());
      if (seen == s.bytes.substr(lo - static_cast<uint64_t>(at), hi - lo)) return true;
    }
    return false;
  }

  // The queue's check: a write that would place a signature is refused as read-only.
  std::error_code Refuse(const IoRequest& req) const {
    if (req.op == Op::kWrite && PlacesSignature(req)) return make_error_code(Errc::kReadOnly);
    return NoError();
  }

 protected:
  std::unique_ptr<ForwardingQueue> NewQueue(std::unique_ptr<IoQueue> lower) override {
    return std::make_unique<RefusingQueue<ProbeGuard>>(*this, std::move(lower));
  }

 private:
  std::vector<ProbeSignature> signatures_;
};

}  // namespace

bool RegisterProbeDetails(const std::string& format, ProbeDetails details) {
  return FormatTable<ProbeDetails>::Get().Set(format, std::move(details));
}

const ProbeDetails* FindProbeDetails(const std::string& format) {
  return FormatTable<ProbeDetails>::Get().Find(format);
}

DevicePtr GuardProbedRaw(DevicePtr raw, std::vector<ProbeSignature> signatures) {
  return MakeDevice<ProbeGuard>(std::move(raw), std::move(signatures));
}

}  // namespace vstack
