#include "imagetools/check.h"

#include <nlohmann/json.hpp>

#include "lib/registry.h"

namespace vstack {

uint64_t ImageCheck::corruptions() const {
  uint64_t n = open_error.empty() ? 0 : 1;
  for (const LayerCheck& l : layers) n += l.result.corruptions;
  return n;
}

uint64_t ImageCheck::leaks() const {
  uint64_t n = 0;
  for (const LayerCheck& l : layers) n += l.result.leaks;
  return n;
}

uint64_t ImageCheck::repaired() const {
  uint64_t n = 0;
  for (const LayerCheck& l : layers) n += l.result.repaired;
  return n;
}

int ImageCheck::exit_code() const { return corruptions() > 0 ? 2 : leaks() > 0 ? 3 : 0; }

std::string ImageCheck::status() const {
  const int code = exit_code();
  return code == 2 ? "corrupt" : code == 3 ? "leaks" : "clean";
}

std::string CheckJson(const ImageCheck& check) {
  nlohmann::json j = {{"spec", check.spec},
                      {"status", check.status()},
                      {"exit_code", check.exit_code()},
                      {"corruptions", check.corruptions()},
                      {"leaks", check.leaks()},
                      {"repaired", check.repaired()}};
  if (!check.open_error.empty()) j["open_error"] = check.open_error;
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerCheck& l : check.layers) {
    layers.push_back({{"kind", l.kind},
                      {"corruptions", l.result.corruptions},
                      {"leaks", l.result.leaks},
                      {"repaired", l.result.repaired},
                      {"messages", l.result.messages}});
  }
  j["layers"] = std::move(layers);
  return j.dump(2);
}

Result<ImageCheck> CheckImage(std::string_view spec_or_path, CheckMode mode,
                              const std::function<bool()>& keep_going, bool force_share) {
  OpenOptions open;
  open.for_check = true;
  open.force_share = force_share;
  open.read_only = mode == CheckMode::kReadOnly;
  ImageCheck check;
  check.spec = std::string(spec_or_path);
  Result<DevicePtr> dev = OpenImage(spec_or_path, open, &check.spec);
  if (!dev) {
    const std::error_code ec = dev.error().code;
    if (ec != make_error_code(Errc::kCorruption) &&
        ec != make_error_code(Errc::kChecksumMismatch)) {
      return std::move(dev).error();
    }
    check.open_error = dev.error().message;
    return check;
  }
  for (BlockDevice* d = dev->get(); d != nullptr; d = d->lower()) {
    LayerCheck layer{d->kind(), {}};
    layer.result.keep_going = keep_going;
    if (layer.result.Stopped()) {
      return MakeError(Errc::kCancelled, "check: interrupted before " + d->kind());
    }
    if (Status s = d->Check(mode, &layer.result); !s) {
      return MakeError(s.error().code, d->kind() + ": " + s.error().ToString());
    }
    check.layers.push_back(std::move(layer));
  }
  VSTACK_RETURN_IF_ERROR((*dev)->Close());
  return check;
}

}  // namespace vstack
