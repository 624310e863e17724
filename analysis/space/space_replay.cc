#include "analysis/space/space_replay.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/registry.h"
#include "lib/spec.h"

namespace vstack {
namespace {

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
  // The replay always writes onto a backend it has just created: format it, whatever the
  // backend (an RBD image made by create=on is not one the layers would format unasked).
  const std::string size = ",size=" + std::to_string(virtual_size) + ",format=on";
  if (o.dedup && o.compress) return "dedup:" + grain + size + "+" + zstd + ",format=on";
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
  std::vector<std::string> files;
  auto backend = [&](uint32_t domain, uint64_t bytes) {
    if (dir.empty()) return "memory:" + std::to_string(bytes);
    files.push_back(dir + "/vstack-space-replay-" + std::to_string(::getpid()) + "-" +
                    std::to_string(domain) + ".img");
    return FormatSpecPart(
        SpecPart{"file", files.back(), {{"create", "on"}, {"size", std::to_string(bytes)}}});
  };
  Result<SpaceCounts> counts = ReplayImagesOnto(images, o, backend, progress, physical);
  for (const std::string& f : files) ::unlink(f.c_str());
  return counts;
}

Result<SpaceCounts> ReplayImagesOnto(std::vector<SpaceImage>& images, const SpaceOptions& o,
                                     const ReplayBackend& backend, const SpaceProgress& progress,
                                     ReplayPhysical* physical) {
  const bool layers = o.dedup || o.compress;
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
  for (uint32_t d = 0; d < domains; ++d) {
    // Sparse below, so room for the worst case (nothing shared) costs nothing.
    const uint64_t below = layers ? RoundUp(2 * virtual_size[d] + (256 << 20), 1 << 20)
                                  : RoundUp(std::max<uint64_t>(virtual_size[d], 1), 1 << 20);
    const std::string spec = backend(d, below);
    auto stack = Open(layers ? ReplayLayers(o, virtual_size[d]) + "+" + spec : spec);
    if (!stack) return Annotate(std::move(stack).error(), "replay stack");
    stacks.push_back(std::move(*stack));
  }

  std::vector<BlockDevice*> devices;
  for (auto& img : images) devices.push_back(img.device.get());
  for (auto& s : stacks) devices.push_back(s.get());
  const unsigned workers = WorkerCount(o.threads, devices);
  SpaceJobs jobs(images, kSpaceJobBytes);
  std::mutex error_mu;
  Error error;
  std::atomic<bool> failed{false};
  auto fail = [&](Error e) {  // the first error is the run's
    std::lock_guard lock(error_mu);
    if (!failed.exchange(true)) error = std::move(e);
  };
  // Without layers: the zero grains among the data written, per domain.
  std::vector<std::atomic<uint64_t>> plain_zero(domains);
  auto work = [&] {
    WorkerIo in, out;
    AlignedBuffer buf(kSpaceJobBytes);
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
        return fail(
            MakeError(ec, what + " at offset " + std::to_string(job.offset) + ": " + ec.message()));
      }
      if (!layers) {
        uint64_t zero = 0;
        for (uint64_t at = 0; at < job.length; at += grain) {
          zero += IsZero(buf.data() + at, std::min<uint64_t>(grain, job.length - at)) ? 1 : 0;
        }
        plain_zero[d] += zero;
      }
      if (progress && !progress(job.length)) return fail(SpaceInterrupted());
    }
  };
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) threads.emplace_back(work);
  for (auto& t : threads) t.join();

  SpaceCounts total;
  ReplayPhysical bytes;
  for (uint32_t d = 0; d < domains && !failed; ++d) {
    uint64_t domain_physical = 0;
    SpaceCounts c;
    if (layers) {
      std::optional<SpaceCounts> found = StackSpace(*stacks[d], &domain_physical);
      if (!found) {
        failed = true;
        error = MakeError(Errc::kNotSupported,
                          "replay stack '" + stacks[d]->Describe() + "' keeps no space accounting");
        break;
      }
      c = *found;
    }
    for (size_t i = 0; i < images.size(); ++i) {
      if (DomainOf(o, i, images.size()) != d) continue;
      if (!layers) {
        const uint64_t grains = (images[i].data_bytes() + grain - 1) / grain;
        c.used_grains += grains;
        domain_physical += images[i].data_bytes();
      }
    }
    if (!layers) {
      c.zero_grains = plain_zero[d];
      c.unique_grains = c.used_grains - c.zero_grains;
      c.compressed_bytes = c.stored_bytes = c.unique_grains * grain;
    }
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
  // Closing flushes every layer's metadata down to the backends.
  for (DevicePtr& s : stacks) {
    Status closed = s->Close();
    if (!closed && !failed.exchange(true))
      error = Annotate(closed.error(), "closing the replay stack");
  }
  stacks.clear();
  if (failed) return error;
  if (physical) *physical = bytes;
  return total;
}

}  // namespace vstack
