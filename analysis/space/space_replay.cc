#include "analysis/space/space_replay.h"

#include <unistd.h>

#include <cstring>
#include <mutex>
#include <thread>

#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/spec.h"

namespace vstack {
namespace {

constexpr uint64_t kJobBytes = 4 << 20;

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

std::optional<SpaceCounts> StackSpace(const BlockDevice& top, uint64_t* physical_bytes) {
  const BlockDevice* upper = &top;
  std::optional<SpaceUsage> u;
  for (; upper != nullptr && !(u = upper->Space()); upper = upper->lower()) {
  }
  if (!u) return std::nullopt;
  SpaceCounts c;
  c.used_grains = u->logical_bytes_live / u->grain_bytes;
  c.zero_grains = u->zero_grains;
  c.unique_grains = u->unique_grains;
  c.compressed_bytes = u->compressed_bytes;
  c.stored_bytes = u->stored_bytes;
  if (physical_bytes) *physical_bytes = u->physical_bytes_used;
  // A compressing layer right below (dedup over zstd): its figures for the upper layer's data
  // area, so the upper layer's metadata pages do not count as the images' data.
  if (const BlockDevice* below = upper->lower()) {
    const uint64_t size = below->geometry().size_bytes;
    if (u->data_offset <= size) {
      if (auto b = below->SpaceOf(u->data_offset, size - u->data_offset)) {
        c.compressed_bytes = b->compressed_bytes;
        c.stored_bytes = b->stored_bytes;
        if (physical_bytes) *physical_bytes = b->physical_bytes_used;
      }
    }
  }
  return c;
}

std::string ReplayLayers(const SpaceOptions& o, uint64_t virtual_size) {
  const std::string grain = "grain=" + std::to_string(o.grain);
  const std::string zstd =
      "zstd:level=" + std::to_string(o.level) + "," + grain + ",rule=" + FormatSizeRule(o.rule);
  const std::string size = ",size=" + std::to_string(virtual_size);
  if (o.dedup && o.compress) return "dedup:" + grain + size + "+" + zstd;
  if (o.dedup) return "dedup:" + grain + size;
  return zstd + size;
}

Result<SpaceCounts> ReplayImages(std::vector<SpaceImage>& images, const SpaceOptions& o,
                                 const std::string& dir, const SpaceProgress& progress,
                                 ReplayPhysical* physical) {
  if (!o.dedup && !o.compress) {
    return MakeError(Errc::kInvalidArgument,
                     "--mode=replay needs a layer to replay through: dedup, or a codec");
  }
  const uint32_t domains = DomainCount(o, images.size());
  const uint32_t grain = o.grain;
  // Each domain's stack holds its images one after the other.
  std::vector<uint64_t> base(images.size());
  std::vector<uint64_t> virtual_size(domains, 0);
  for (size_t i = 0; i < images.size(); ++i) {
    const uint32_t d = DomainOf(o, i, images.size());
    base[i] = virtual_size[d];
    virtual_size[d] += RoundUp(images[i].size, grain);
  }
  std::vector<DevicePtr> stacks;
  std::vector<std::string> files;
  for (uint32_t d = 0; d < domains; ++d) {
    // Sparse below, so room for the worst case (nothing shared) costs nothing.
    const uint64_t below = RoundUp(2 * virtual_size[d] + (256 << 20), 1 << 20);
    std::string backend = "memory:" + std::to_string(below);
    if (!dir.empty()) {
      files.push_back(dir + "/vstack-space-replay-" + std::to_string(::getpid()) + "-" +
                      std::to_string(d) + ".img");
      backend = FormatSpecPart(
          SpecPart{"file", files.back(), {{"create", "on"}, {"size", std::to_string(below)}}});
    }
    auto stack = Open(ReplayLayers(o, virtual_size[d]) + "+" + backend);
    if (!stack) {
      for (const std::string& f : files) ::unlink(f.c_str());
      return Annotate(std::move(stack).error(), "replay stack");
    }
    stacks.push_back(std::move(*stack));
  }

  std::vector<BlockDevice*> devices;
  for (auto& img : images) devices.push_back(img.device.get());
  for (auto& s : stacks) devices.push_back(s.get());
  const unsigned workers = WorkerCount(o.threads, devices);
  SpaceJobs jobs(images, kJobBytes);
  std::mutex error_mu;
  Error error;
  std::atomic<bool> failed{false};
  auto work = [&] {
    WorkerIo in, out;
    AlignedBuffer buf(kJobBytes);
    SpaceJob job;
    while (!failed && jobs.Next(&job)) {
      SpaceImage& img = images[job.image];
      const uint32_t d = DomainOf(o, job.image, images.size());
      std::error_code ec =
          in.For(*img.device, job.image).Read(job.offset, buf.span().first(job.length));
      std::string what = "read " + img.name;
      if (!ec) {
        ec = out.For(*stacks[d], d)
                 .Write(base[job.image] + job.offset, buf.span().first(job.length));
        what = "replay write";
      }
      if (ec) {
        std::lock_guard lock(error_mu);
        if (!failed.exchange(true)) {
          error = MakeError(
              ec, what + " at offset " + std::to_string(job.offset) + ": " + ec.message());
        }
        return;
      }
      if (progress) progress(job.length);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) threads.emplace_back(work);
  for (auto& t : threads) t.join();

  SpaceCounts total;
  ReplayPhysical bytes;
  for (uint32_t d = 0; d < domains && !failed; ++d) {
    uint64_t domain_physical = 0;
    std::optional<SpaceCounts> found = StackSpace(*stacks[d], &domain_physical);
    if (!found) {
      failed = true;
      error = MakeError(Errc::kNotSupported,
                        "replay stack '" + stacks[d]->Describe() + "' keeps no space accounting");
      break;
    }
    SpaceCounts c = *found;
    bytes.modelled_bytes += c.stored_bytes;
    bytes.physical_bytes += domain_physical;
    for (size_t i = 0; i < images.size(); ++i) {
      if (DomainOf(o, i, images.size()) != d) continue;
      c.provisioned_bytes += images[i].size;
      // Zero extents are not written: they are used zero grains, as the scan counts them.
      c.used_grains += images[i].zero_grains(grain);
      c.zero_grains += images[i].zero_grains(grain);
    }
    AddMetadata(o, grain, &c);
    total += c;
  }
  stacks.clear();  // closes them
  for (const std::string& f : files) ::unlink(f.c_str());
  if (failed) return error;
  if (physical) *physical = bytes;
  return total;
}

}  // namespace vstack
