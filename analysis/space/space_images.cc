#include "analysis/space/space_images.h"

#include <algorithm>
#include <thread>

#include "lib/registry.h"

namespace vstack {

uint64_t SpaceImage::used_bytes() const {
  uint64_t n = 0;
  for (const auto& [off, len] : used) n += len;
  return n;
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
    for (const Extent& e : extents) {
      if (e.flags & kExtentHole) continue;
      const uint64_t start = e.offset / grain * grain;
      const uint64_t end = std::min<uint64_t>((e.offset + e.length + grain - 1) / grain * grain, img.size);
      if (!img.used.empty() && img.used.back().first + img.used.back().second >= start) {
        auto& last = img.used.back();
        last.second = std::max(last.first + last.second, end) - last.first;
      } else {
        img.used.emplace_back(start, end - start);
      }
    }
    images.push_back(std::move(img));
  }
  return images;
}

SpaceJobs::SpaceJobs(const std::vector<SpaceImage>& images, uint64_t max) {
  for (size_t i = 0; i < images.size(); ++i) {
    for (const auto& [off, len] : images[i].used) {
      for (uint64_t at = 0; at < len; at += max) jobs_.push_back({i, off + at, std::min(max, len - at)});
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
