#include "analysis/space/space_scan.h"

#include <array>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "blockdev/dedup/fingerprint.h"
#include "blockdev/zstd/grain_codec.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"

namespace vstack {
namespace {

constexpr uint64_t kJobBytes = 4 << 20;

// The fingerprints of one dedup domain, sharded so workers rarely contend.
class FingerprintSet {
 public:
  // True if `fp` was not in the set.
  bool Insert(const Fingerprint& fp) {
    Shard& s = shards_[fp.hi % shards_.size()];
    std::lock_guard lock(s.mu);
    return s.set.insert(fp).second;
  }

 private:
  struct Hash {
    size_t operator()(const Fingerprint& fp) const { return static_cast<size_t>(fp.lo); }
  };
  struct Shard {
    std::mutex mu;
    std::unordered_set<Fingerprint, Hash> set;
  };
  std::array<Shard, 64> shards_;
};

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
  SpaceJobs jobs(images, kJobBytes);
  std::vector<std::vector<SpaceCounts>> found(workers, std::vector<SpaceCounts>(domains));
  std::mutex error_mu;
  Error error;
  std::atomic<bool> failed{false};

  auto work = [&](unsigned w) {
    WorkerIo io;
    GrainCompressor compressor(o.level);
    AlignedBuffer buf(kJobBytes);
    std::vector<unsigned char> out(grain);
    SpaceJob job;
    while (!failed && jobs.Next(&job)) {
      SpaceImage& img = images[job.image];
      std::error_code ec = io.For(*img.device, job.image).Read(job.offset, buf.span().first(job.length));
      if (ec) {
        std::lock_guard lock(error_mu);
        if (!failed.exchange(true)) {
          error = MakeError(ec, img.name + ": cannot read offset " + std::to_string(job.offset) +
                                    ": " + ec.message());
        }
        return;
      }
      // The image's last grain may be partial: it counts as a whole grain padded with zeros.
      const uint64_t padded = (job.length + grain - 1) / grain * grain;
      std::memset(buf.data() + job.length, 0, padded - job.length);
      SpaceCounts& c = found[w][DomainOf(o, job.image, images.size())];
      FingerprintSet& set = *sets[DomainOf(o, job.image, images.size())];
      for (uint64_t at = 0; at < padded; at += grain) {
        const std::byte* g = buf.data() + at;
        CountGrain(g, o, set, compressor, out.data(), &c);
      }
      if (progress) progress(job.length);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) threads.emplace_back(work, w);
  for (auto& t : threads) t.join();
  if (failed) return error;

  SpaceCounts total;
  for (uint32_t d = 0; d < domains; ++d) {
    SpaceCounts c;
    for (unsigned w = 0; w < workers; ++w) c += found[w][d];
    for (size_t i = 0; i < images.size(); ++i) {
      if (DomainOf(o, i, images.size()) == d) c.provisioned_bytes += images[i].size;
    }
    AddMetadata(o, grain, &c);
    total += c;
  }
  return total;
}

}  // namespace vstack
