#include "analysis/space/space_scan.h"

#include "analysis/space/space_fingerprint_set.h"
#include "analysis/space/space_reader.h"
#include "blockdev/dedup/fingerprint.h"
#include "blockdev/zstd/grain_codec.h"
#include "lib/iovec.h"

namespace vstack {
namespace {

// Counts one grain as the replay stack would store it: through dedup's own first step
// (ClassifyGrain) and index, then zstd's own pipeline (EncodeGrain), in the stack's order.
void CountGrain(const std::byte* g, const SpaceOptions& o, FingerprintSet& set,
                GrainCompressor& compressor, unsigned char* scratch, SpaceCounts* c) {
  const uint32_t grain = o.grain;
  ++c->used_grains;
  if (o.dedup) {
    Fingerprint fp;
    if (!ClassifyGrain(g, grain, &fp)) {
      ++c->zero_grains;
      return;
    }
    if (!set.Insert(fp)) return;  // a duplicate: stored once already
  }
  if (o.compress) {
    const EncodedGrain e = EncodeGrain(compressor, o.rule, g, grain, scratch);
    if (e.zero) {
      ++c->zero_grains;
      return;
    }
    ++c->unique_grains;
    c->compressed_bytes += e.form.compressed ? e.compressed : grain;
    c->stored_bytes += e.form.slot;
    return;
  }
  if (!o.dedup && IsZero(g, grain)) {  // neither layer: the zero test alone
    ++c->zero_grains;
    return;
  }
  ++c->unique_grains;
  c->compressed_bytes += grain;
  c->stored_bytes += grain;
}

}  // namespace

Result<SpaceCounts> ScanImages(std::vector<SpaceImage>& images, const SpaceOptions& o,
                               const SpaceProgress& progress) {
  const uint32_t domains = DomainCount(o, images.size());
  const uint32_t grain = o.grain;
  std::vector<std::unique_ptr<FingerprintSet>> sets;
  for (uint32_t d = 0; d < domains; ++d) sets.push_back(std::make_unique<FingerprintSet>());
  std::vector<BlockDevice*> devices;
  for (auto& img : images) devices.push_back(img.device.get());
  const unsigned workers = WorkerCount(o.threads, devices);
  struct Worker {
    explicit Worker(const SpaceOptions& o, uint32_t domains)
        : compressor(o.level), out(o.grain), found(domains) {}
    GrainCompressor compressor;
    std::vector<unsigned char> out;
    std::vector<SpaceCounts> found;
  };
  std::vector<std::unique_ptr<Worker>> state;
  for (unsigned w = 0; w < workers; ++w) state.push_back(std::make_unique<Worker>(o, domains));
  auto visit = [&](unsigned w, const SpaceJob& job, const std::byte* data, uint64_t grains) {
    Worker& s = *state[w];
    const uint32_t d = DomainOf(o, job.image, images.size());
    for (uint64_t i = 0; i < grains; ++i) {
      CountGrain(data + i * grain, o, *sets[d], s.compressor, s.out.data(), &s.found[d]);
    }
  };
  VSTACK_RETURN_IF_ERROR(ReadImageGrains(images, workers, grain, visit, progress));

  SpaceCounts total;
  for (uint32_t d = 0; d < domains; ++d) {
    SpaceCounts c;
    for (unsigned w = 0; w < workers; ++w) c += state[w]->found[d];
    for (size_t i = 0; i < images.size(); ++i) {
      if (DomainOf(o, i, images.size()) != d) continue;
      c.provisioned_bytes += images[i].size;
      c.used_grains += images[i].zero_grains(grain);  // zero extents, never read
      c.zero_grains += images[i].zero_grains(grain);
    }
    AddMetadata(o, grain, &c);
    total += c;
  }
  return total;
}

}  // namespace vstack
