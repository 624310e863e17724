#include "analysis/space/space_images.h"

#include <algorithm>
#include <thread>

#include "lib/registry.h"
#include "lib/size.h"

namespace vstack {

namespace {

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

uint64_t Sum(const Ranges& ranges) {
  uint64_t n = 0;
  for (const auto& [off, len] : ranges) n += len;
  return n;
}

// Appends [start, end) to sorted `ranges`, merging it with the last one when they touch.
void Append(Ranges* ranges, uint64_t start, uint64_t end) {
  if (!ranges->empty() && ranges->back().first + ranges->back().second >= start) {
    auto& last = ranges->back();
    last.second = std::max(last.first + last.second, end) - last.first;
  } else {
    ranges->emplace_back(start, end - start);
  }
}

// `from` minus `cut` (both sorted and disjoint within themselves).
Ranges Subtract(const Ranges& from, const Ranges& cut) {
  Ranges out;
  size_t c = 0;
  for (auto [start, len] : from) {
    uint64_t at = start;
    const uint64_t end = start + len;
    while (c < cut.size() && cut[c].first + cut[c].second <= at) ++c;
    for (size_t k = c; k < cut.size() && cut[k].first < end; ++k) {
      if (cut[k].first > at) out.emplace_back(at, cut[k].first - at);
      at = std::max(at, cut[k].first + cut[k].second);
    }
    if (at < end) out.emplace_back(at, end - at);
  }
  return out;
}

}  // namespace

uint64_t SpaceImage::used_bytes() const { return Sum(used) + Sum(zero); }

uint64_t SpaceImage::data_bytes() const { return Sum(used); }

uint64_t SpaceImage::zero_grains(uint32_t grain) const {
  uint64_t n = 0;
  for (const auto& [off, len] : zero) n += (len + grain - 1) / grain;
  return n;
}

Error SpaceInterrupted() { return MakeError(Errc::kCancelled, "interrupted"); }

std::string PartialGrainNote(const std::vector<SpaceImage>& images, uint32_t grain) {
  std::vector<const SpaceImage*> partial;
  for (const SpaceImage& i : images) {
    const auto ends_at_size = [&](const Ranges& r) {
      return !r.empty() && r.back().first + r.back().second == i.size;
    };
    if (i.size % grain != 0 && (ends_at_size(i.used) || ends_at_size(i.zero))) {
      partial.push_back(&i);
    }
  }
  if (partial.empty()) return "";
  std::string names;
  for (size_t k = 0; k < partial.size() && k < 3; ++k) {
    names +=
        (k ? ", " : "") + partial[k]->name + " (" + std::to_string(partial[k]->size) + " bytes)";
  }
  if (partial.size() > 3) names += " and " + std::to_string(partial.size() - 3) + " more";
  return names + (partial.size() == 1 ? ": its size is" : ": their sizes are") +
         " not a multiple of the " + FormatSize(grain) +
         " grain, and the last grain counts whole from \"used\" on, as a grain layer stores it, "
         "so \"used\" can exceed \"provisioned\" by less than a grain per image";
}

Result<std::vector<SpaceImage>> OpenSpaceImages(const std::vector<std::string>& names,
                                                uint32_t grain) {
  std::vector<SpaceImage> images;
  OpenOptions ro;
  ro.read_only = true;
  for (const std::string& name : names) {
    SpaceImage img;
    img.name = name;
    VSTACK_ASSIGN_OR_RETURN(img.device, OpenImage(name, ro, &img.spec));
    img.size = img.device->geometry().size_bytes;
    std::vector<Extent> extents;
    Status mapped = img.device->MapExtents(0, img.size, &extents);
    if (!mapped) return Annotate(std::move(mapped).error(), name);
    Ranges zero;
    for (const Extent& e : extents) {
      if (e.flags & kExtentHole) continue;
      const uint64_t start = e.offset / grain * grain;
      const uint64_t end =
          std::min<uint64_t>((e.offset + e.length + grain - 1) / grain * grain, img.size);
      Append((e.flags & kExtentZero) ? &zero : &img.used, start, end);
    }
    // A grain that holds data anywhere is read, even if part of it is a zero extent.
    img.zero = Subtract(zero, img.used);
    images.push_back(std::move(img));
  }
  return images;
}

SpaceJobs::SpaceJobs(const std::vector<SpaceImage>& images, uint64_t max) {
  for (size_t i = 0; i < images.size(); ++i) {
    for (const auto& [off, len] : images[i].used) {
      for (uint64_t at = 0; at < len; at += max)
        jobs_.push_back({i, off + at, std::min(max, len - at)});
    }
  }
}

bool SpaceJobs::Next(SpaceJob* job) {
  const size_t i = next_.fetch_add(1);
  if (i >= jobs_.size()) return false;
  *job = jobs_[i];
  return true;
}

SyncIo& WorkerIo::For(BlockDevice& device, size_t slot) {
  if (io_.size() <= slot) io_.resize(slot + 1);
  if (!io_[slot]) io_[slot] = std::make_unique<SyncIo>(device);
  return *io_[slot];
}

unsigned WorkerCount(unsigned requested, const std::vector<BlockDevice*>& devices) {
  for (BlockDevice* d : devices) {
    if (!d->Has(kCapThreadSafe)) return 1;
  }
  if (requested) return requested;
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace vstack
