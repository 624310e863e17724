#include "imagetools/compact.h"

#include "lib/registry.h"
#include "lib/spec.h"

namespace vstack {
namespace {

std::string FormatNames() {
  std::string names;
  for (const std::string& f : CompactableFormats()) names += (names.empty() ? "" : ", ") + f;
  return names;
}

}  // namespace

Result<CompactReport> CompactImage(const std::string& target, const CompactProgress& progress) {
  // The file below the format's layer, and the format: named by a spec, or probed.
  std::string format;
  std::string below;
  if (IsStackSpec(target)) {
    auto parts = ParseSpec(target);
    if (!parts || parts->size() < 2 || FindCompactor((*parts)[0].name) == nullptr) {
      return MakeError(Errc::kInvalidArgument, "'" + target + "' is not a FORMAT+BACKEND spec " +
                                                   "of a format that can be compacted (" +
                                                   FormatNames() + ")");
    }
    format = (*parts)[0].name;
    parts->erase(parts->begin());
    below = FormatSpec(*parts);
  } else {
    below = FormatSpecPart(SpecPart{"file", target, {}});
  }
  VSTACK_ASSIGN_OR_RETURN(DevicePtr file, Open(below));
  if (format.empty()) {
    for (const std::string& f : CompactableFormats()) {
      const ComponentInfo* c = Registry::Global().Find(f);
      if (c != nullptr && c->probe && c->probe(*file)) {
        format = f;
        break;
      }
    }
    if (format.empty()) {
      return MakeError(Errc::kInvalidArgument, "'" + target + "' is not an image of a format " +
                                                   "that can be compacted (" + FormatNames() +
                                                   ")");
    }
  }
  const CompactProgress report_to =
      progress ? progress : [](CompactStage, uint64_t, uint64_t) {};
  VSTACK_ASSIGN_OR_RETURN(CompactReport report, (*FindCompactor(format))(*file, report_to));
  VSTACK_RETURN_IF_ERROR(file->Close());
  return report;
}

}  // namespace vstack
