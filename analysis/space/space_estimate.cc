#include "analysis/space/space_estimate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "analysis/space/space_reader.h"
#include "blockdev/dedup/fingerprint.h"
#include "blockdev/zstd/grain_codec.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/sync_io.h"

namespace vstack {
namespace {

struct FingerprintHash {
  size_t operator()(const Fingerprint& fp) const { return static_cast<size_t>(fp.hi); }
};

// About what one sampled fingerprint costs in an unordered_map: the node (key, sizes, next
// pointer, allocator header) and a bucket.
constexpr uint64_t kBytesPerFingerprint = 64;

uint64_t Round(double v) { return v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v)); }

}  // namespace

struct SketchWorker::Impl {
  explicit Impl(const SpaceOptions& o) : o(o), compressor(o.level), out(o.grain) {}
  const SpaceOptions& o;
  GrainCompressor compressor;
  std::vector<unsigned char> out;
  std::unordered_map<Fingerprint, std::pair<uint32_t, uint32_t>, FingerprintHash> sample;
  // This worker's counts, position sample and shift, as a sketch part (its sample is `sample`).
  SpaceSketch part;

  // The compressed and stored sizes of a non-zero grain; false if the codec finds it all zeros.
  bool Encode(const std::byte* g, uint32_t* comp, uint32_t* stored_bytes) {
    if (!o.compress) {
      *comp = *stored_bytes = o.grain;
      return true;
    }
    const EncodedGrain e = EncodeGrain(compressor, o.rule, g, o.grain, out.data());
    if (e.zero) return false;
    *comp = e.form.compressed ? e.compressed : o.grain;
    *stored_bytes = e.form.slot;
    return true;
  }
};

SketchWorker::SketchWorker(const SpaceOptions& o) : impl_(std::make_unique<Impl>(o)) {}
SketchWorker::~SketchWorker() = default;

void SketchWorker::Grain(const std::byte* g) {
  Impl& m = *impl_;
  ++m.part.used_grains;
  cost_.bytes_hashed += m.o.grain;
  Fingerprint fp;
  if (!ClassifyGrain(g, m.o.grain, &fp)) {
    ++m.part.zero_grains;
    return;
  }
  ++cost_.nonzero_grains;
  if (SampleHash(fp, m.o.seed) % (m.o.modulus << m.part.shift) != 0) return;
  if (m.sample.contains(fp)) return;
  uint32_t comp = 0, stored = 0;
  m.Encode(g, &comp, &stored);
  if (m.o.compress) cost_.bytes_compressed += m.o.grain;
  m.sample.emplace(fp, std::make_pair(comp, stored));
  if (m.o.cap && m.sample.size() > m.o.cap) {
    ++m.part.shift;
    const uint64_t mod = m.o.modulus << m.part.shift;
    std::erase_if(m.sample,
                  [&](const auto& kv) { return SampleHash(kv.first, m.o.seed) % mod != 0; });
  }
  cost_.peak_fingerprints = std::max<uint64_t>(cost_.peak_fingerprints, m.sample.size());
}

void SketchWorker::SampledGrain(const std::byte* g) {
  Impl& m = *impl_;
  ++m.part.sampled_grains;
  cost_.bytes_read += m.o.grain;
  uint32_t comp = 0, stored = 0;
  const bool nonzero = m.o.compress ? m.Encode(g, &comp, &stored) : !IsZero(g, m.o.grain);
  if (m.o.compress) cost_.bytes_compressed += m.o.grain;
  if (!nonzero) {
    ++m.part.sampled_zero;
    return;
  }
  if (!m.o.compress) comp = stored = m.o.grain;
  m.part.sampled_whole += stored == m.o.grain;
  m.part.stored.Add(stored);
  m.part.compressed.Add(comp);
}

void SketchWorker::AddTo(SpaceSketch* s) {
  Impl& m = *impl_;
  SpaceSketch part = m.part;
  part.params = s->params;
  part.sample.reserve(m.sample.size());
  for (const auto& [fp, sizes] : m.sample) part.sample.push_back({fp, sizes.first, sizes.second});
  SortByFingerprint(&part.sample);
  // The parameters are equal, so the merge cannot fail.
  (void)Merge(s, part);
}

SketchParams ParamsOf(const SpaceOptions& o) {
  return {o.grain,
          o.dedup,
          o.compress,
          o.compress ? o.level : 0,
          o.compress ? o.rule : SizeRule{},
          o.seed,
          o.modulus,
          o.dedup ? o.cap : 0};
}

void ApplyParams(const SketchParams& p, SpaceOptions* o) {
  o->grain = p.grain;
  o->dedup = p.dedup;
  o->compress = p.compress;
  if (p.compress) {
    o->level = p.level;
    o->rule = p.rule;
  }
  o->seed = p.seed;
  o->modulus = p.modulus;
  o->cap = p.cap;
  o->estimate = true;
}

uint64_t CapFor(double accuracy, double confidence) {
  const double z = NormalQuantile(confidence);
  return static_cast<uint64_t>(std::ceil(2 * (z / accuracy) * (z / accuracy)));
}

Result<SpaceSketch> SketchImages(std::vector<SpaceImage>& images, const SpaceOptions& o,
                                 EstimateCost* cost, const SpaceProgress& progress) {
  if (o.scope != SpaceOptions::Scope::kGlobal) {
    return MakeError(Errc::kInvalidArgument, "--estimate supports --scope global only");
  }
  SpaceSketch s;
  s.params = ParamsOf(o);
  s.images = images.size();
  const uint32_t grain = o.grain;
  uint64_t known_zero = 0;
  for (const SpaceImage& img : images) {
    s.provisioned_bytes += img.size;
    known_zero += img.zero_grains(grain);
    for (const auto& [off, len] : img.used) s.data_grains += (len + grain - 1) / grain;
  }
  std::vector<BlockDevice*> devices;
  for (auto& img : images) devices.push_back(img.device.get());
  const unsigned workers = o.dedup ? WorkerCount(o.threads, devices) : 1;
  std::vector<std::unique_ptr<SketchWorker>> state;
  for (unsigned w = 0; w < workers; ++w) state.push_back(std::make_unique<SketchWorker>(o));
  if (o.dedup) {
    auto visit = [&](unsigned w, const SpaceJob&, const std::byte* data, uint64_t grains) {
      for (uint64_t i = 0; i < grains; ++i) state[w]->Grain(data + i * grain);
    };
    VSTACK_RETURN_IF_ERROR(ReadImageGrains(images, workers, grain, visit, progress));
    for (const SpaceImage& img : images) s.bytes_read += img.data_bytes();
  } else {
    // Only the grains sampled by position are read.
    AlignedBuffer buf(grain);
    for (SpaceImage& img : images) {
      SyncIo io(*img.device);
      for (const auto& [off, len] : img.used) {
        for (uint64_t at = off; at < off + len; at += grain) {
          if (PositionHash(img.name, at / grain, o.seed) % o.modulus != 0) continue;
          const uint64_t n = std::min<uint64_t>(grain, off + len - at);
          std::memset(buf.data(), 0, grain);
          if (std::error_code ec = io.Read(at, buf.span().first(n))) {
            return MakeError(
                ec, img.name + ": cannot read offset " + std::to_string(at) + ": " + ec.message());
          }
          state[0]->SampledGrain(buf.data());
          s.bytes_read += n;
        }
        if (progress && !progress(len)) return SpaceInterrupted();
      }
    }
  }
  for (auto& w : state) w->AddTo(&s);
  s.used_grains = s.data_grains + known_zero;
  s.zero_grains += known_zero;
  if (cost) {
    *cost = {};
    for (auto& w : state) {
      const EstimateCost& c = w->cost();
      cost->bytes_hashed += c.bytes_hashed;
      cost->bytes_compressed += c.bytes_compressed;
      cost->peak_fingerprints += c.peak_fingerprints;
      cost->nonzero_grains += c.nonzero_grains;
    }
    for (const SpaceImage& img : images) cost->bytes_covered += img.used_bytes();
    cost->bytes_read = s.bytes_read;
    cost->peak_memory_bytes = cost->peak_fingerprints * kBytesPerFingerprint;
  }
  return s;
}

SpaceReport EstimateReport(const SpaceSketch& s, const SpaceOptions& o) {
  const double g = s.params.grain, p = s.Fraction(), z = NormalQuantile(o.confidence);
  // Each estimated quantity as point, low and high, in grains or bytes.
  Interval nonzero, unique, stored, compressed, mean_stored;
  if (s.params.dedup) {
    const double nz = static_cast<double>(s.used_grains - s.zero_grains);
    nonzero = {nz, nz, nz};
    unique = CountInterval(s.sample.size(), p, z);
    unique.value = std::min(unique.value, nz);
    unique.high = std::min(unique.high, nz);
    SizeSums st, co;
    for (const SampledGrain& x : s.sample) {
      st.Add(x.stored);
      co.Add(x.compressed);
    }
    // Horvitz-Thompson: every distinct grain was kept with probability p.
    auto total = [&](const SizeSums& sums) {
      const double v = static_cast<double>(sums.sum) / p;
      const double half = z * std::sqrt((1 - p) * static_cast<double>(sums.sum_sq)) / p;
      return Interval{v, std::max(static_cast<double>(sums.sum), v - half),
                      std::min(nz * g, v + half)};
    };
    stored = total(st);
    compressed = total(co);
    uint64_t whole = 0;
    SampleSums rest;
    for (const SampledGrain& x : s.sample) {
      if (x.stored == s.params.grain) {
        ++whole;
      } else {
        rest.Add(x.stored);
      }
    }
    mean_stored = MixtureMeanInterval(whole, g, rest, p, z);
  } else {
    const double data = static_cast<double>(s.data_grains);
    Interval share = ProportionInterval(s.sampled_grains - s.sampled_zero, s.sampled_grains, z);
    if (p >= 1) share.low = share.high = share.value;  // every grain was read
    nonzero = {data * share.value, data * share.low, data * share.high};
    unique = nonzero;
    // Mean stored size per sampled grain, zeros counting 0, times the data grains. The stored
    // sizes' interval allows for rare grains stored whole, when the sketch counted them.
    auto mean = [&](const SizeSums& sums, bool stored_sizes, uint64_t zeros) {
      SampleSums all = sums.ToSample();
      all.n += zeros;
      if (!stored_sizes || !s.whole_known) return MeanInterval(all, p, z);
      const double whole = static_cast<double>(s.sampled_whole);
      SampleSums rest = all;
      rest.n -= s.sampled_whole;
      rest.sum -= whole * g;
      rest.sum_sq -= whole * g * g;
      return MixtureMeanInterval(s.sampled_whole, g, rest, p, z);
    };
    auto total = [&](const Interval& m) {
      return Interval{data * m.value, data * m.low, std::min(data * m.high, nonzero.high * g)};
    };
    const uint64_t zeros = s.sampled_grains - s.stored.n;
    stored = total(mean(s.stored, true, zeros));
    compressed = total(mean(s.compressed, false, zeros));
    mean_stored = mean(s.stored, true, 0);
  }
  auto counts = [&](double nz, double uq, double st, double co) {
    SpaceCounts c;
    c.provisioned_bytes = s.provisioned_bytes;
    c.used_grains = s.used_grains;
    c.zero_grains = s.used_grains - std::min<uint64_t>(s.used_grains, Round(nz));
    c.unique_grains = Round(uq);
    c.compressed_bytes = Round(co);
    c.stored_bytes = Round(st);
    AddMetadata(o, s.params.grain, &c);
    return c;
  };
  SpaceReport r =
      BuildReport(counts(nonzero.value, unique.value, stored.value, compressed.value), o);
  const SpaceCounts lo = counts(nonzero.low, unique.low, stored.low, compressed.low);
  const SpaceCounts hi = counts(nonzero.high, unique.high, stored.high, compressed.high);
  r.confidence = o.confidence;
  const double used = static_cast<double>(s.used_grains) * g;
  auto set = [&](size_t step, double b_lo, double b_hi, double r_lo, double r_hi) {
    SpaceStep& st = r.steps[step];
    st.bytes_low = std::min(st.bytes, Round(b_lo));
    st.bytes_high = std::max(st.bytes, Round(b_hi));
    st.ratio_low = std::min(st.ratio, r_lo);
    st.ratio_high = std::max(st.ratio, r_hi);
  };
  auto div = ReductionRatio;
  // 2: after zero elimination, 3: after dedup, 4: after compression, 5: with metadata.
  set(2, nonzero.low * g, nonzero.high * g, div(used, nonzero.high * g),
      div(used, nonzero.low * g));
  if (s.params.dedup) {
    set(3, unique.low * g, unique.high * g, div(nonzero.value, unique.high),
        div(nonzero.value, unique.low));
  } else {
    set(3, unique.low * g, unique.high * g, 1, 1);
  }
  if (o.compress) {
    set(4, stored.low, stored.high, div(g, mean_stored.high), div(g, mean_stored.low));
  } else {
    set(4, unique.low * g, unique.high * g, 1, 1);
  }
  const double wm_lo = double(lo.stored_bytes + lo.metadata_bytes);
  const double wm_hi = double(hi.stored_bytes + hi.metadata_bytes);
  // The metadata factor (stored / with metadata) at every corner of the two intervals it
  // depends on: the distinct grains (maps) and the stored bytes (bins, checksums).
  double m_lo = 1, m_hi = 0;
  for (double uq : {unique.low, unique.high}) {
    for (double st : {stored.low, stored.high}) {
      const SpaceCounts c = counts(nonzero.value, uq, st, compressed.value);
      const double m = div(double(c.stored_bytes), double(c.stored_bytes + c.metadata_bytes));
      m_lo = std::min(m_lo, m);
      m_hi = std::max(m_hi, m);
    }
  }
  set(5, wm_lo, wm_hi, m_lo, m_hi);
  const double factor = ProtectionFactor(o.protection);
  set(6, wm_lo * factor, wm_hi * factor, r.steps[6].ratio, r.steps[6].ratio);
  r.data_reduction_low = std::min(r.data_reduction, div(used, wm_hi));
  r.data_reduction_high = std::max(r.data_reduction, div(used, wm_lo));
  r.overall_low = std::min(r.overall, div(used, wm_hi * factor));
  r.overall_high = std::max(r.overall, div(used, wm_lo * factor));
  return r;
}

}  // namespace vstack
