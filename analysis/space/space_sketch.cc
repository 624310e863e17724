#include "analysis/space/space_sketch.h"

#include <algorithm>
#include <cstring>

#include "blockdev/metastore/crc32c.h"
#include "lib/endian.h"

namespace vstack {
namespace {

constexpr char kMagic[8] = {'V', 'S', 'T', 'K', 'S', 'K', 'C', 'H'};
// Version 2 added the count of position-sampled grains stored whole; version 1 files are
// read with that count unknown.
constexpr uint32_t kVersion = 2;
// Written for sampled_whole when a sketch merged from a version 1 file does not know it.
constexpr uint64_t kWholeUnknown = UINT64_MAX;
constexpr uint32_t kMaxShift = 40;

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool Kept(const SampledGrain& g, const SpaceSketch& s) {
  return SampleHash(g.fp, s.params.seed) % (s.params.modulus << s.shift) == 0;
}

bool ByFingerprint(const SampledGrain& a, const SampledGrain& b) {
  return a.fp.hi != b.fp.hi ? a.fp.hi < b.fp.hi : a.fp.lo < b.fp.lo;
}

class Writer {
 public:
  void U32(uint32_t v) { Put(&v, 4); }
  void U64(uint64_t v) { Put(&v, 8); }
  void Put(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  std::string out;
};

class Reader {
 public:
  Reader(const std::string& in, size_t end) : in_(in), end_(end) {}
  bool U32(uint32_t* v) { return Get(v, 4); }
  bool U64(uint64_t* v) { return Get(v, 8); }
  bool Get(void* p, size_t n) {
    if (end_ - at_ < n) return false;
    std::memcpy(p, in_.data() + at_, n);
    at_ += n;
    return true;
  }
  size_t left() const { return end_ - at_; }

 private:
  const std::string& in_;
  size_t end_, at_ = 0;
};

}  // namespace

SizeSums& SizeSums::operator+=(const SizeSums& o) {
  n += o.n;
  sum += o.sum;
  sum_sq += o.sum_sq;
  return *this;
}

SampleSums SizeSums::ToSample() const {
  return {n, static_cast<double>(sum), static_cast<double>(sum_sq)};
}

double SpaceSketch::Fraction() const {
  return 1.0 / static_cast<double>(params.modulus << (params.dedup ? shift : 0));
}

uint64_t SampleHash(const Fingerprint& fp, uint64_t seed) { return Mix(fp.lo ^ Mix(seed)); }

uint64_t PositionHash(const std::string& image, uint64_t grain_index, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a of the name
  for (unsigned char c : image) h = (h ^ c) * 0x100000001b3ULL;
  return Mix(Mix(h ^ Mix(seed)) + grain_index);
}

void SortByFingerprint(std::vector<SampledGrain>* grains) {
  std::sort(grains->begin(), grains->end(), ByFingerprint);
}

void AddSample(SpaceSketch* s, std::vector<SampledGrain> more) {
  std::vector<SampledGrain> merged;
  merged.reserve(s->sample.size() + more.size());
  std::merge(s->sample.begin(), s->sample.end(), more.begin(), more.end(),
             std::back_inserter(merged), ByFingerprint);
  merged.erase(
      std::unique(merged.begin(), merged.end(),
                  [](const SampledGrain& a, const SampledGrain& b) { return a.fp == b.fp; }),
      merged.end());
  std::erase_if(merged, [s](const SampledGrain& g) { return !Kept(g, *s); });
  while (s->params.cap && merged.size() > s->params.cap && s->shift < kMaxShift) {
    ++s->shift;
    std::erase_if(merged, [s](const SampledGrain& g) { return !Kept(g, *s); });
  }
  s->sample = std::move(merged);
}

Status Merge(SpaceSketch* a, const SpaceSketch& b) {
  const SketchParams &x = a->params, &y = b.params;
  auto differ = [](const std::string& what, const std::string& l, const std::string& r) {
    return MakeError(Errc::kInvalidArgument, "cannot merge sketches made with different " + what +
                                                 " (" + l + " and " + r + ")");
  };
  if (x.grain != y.grain) return differ("grains", std::to_string(x.grain), std::to_string(y.grain));
  if (x.dedup != y.dedup)
    return differ("dedup settings", x.dedup ? "on" : "off", y.dedup ? "on" : "off");
  auto codec = [](const SketchParams& p) {
    return p.compress ? "zstd:" + std::to_string(p.level) + " rule " + FormatSizeRule(p.rule)
                      : "none";
  };
  if (codec(x) != codec(y)) return differ("codecs", codec(x), codec(y));
  if (x.seed != y.seed) return differ("hash seeds", std::to_string(x.seed), std::to_string(y.seed));
  if (x.modulus != y.modulus || x.cap != y.cap) {
    auto fraction = [](const SketchParams& p) {
      return p.cap ? "a cap of " + std::to_string(p.cap) + " fingerprints from 1/" +
                         std::to_string(p.modulus)
                   : "1/" + std::to_string(p.modulus);
    };
    return differ("sampling fractions", fraction(x), fraction(y));
  }
  a->images += b.images;
  a->provisioned_bytes += b.provisioned_bytes;
  a->used_grains += b.used_grains;
  a->zero_grains += b.zero_grains;
  a->data_grains += b.data_grains;
  a->bytes_read += b.bytes_read;
  a->sampled_grains += b.sampled_grains;
  a->sampled_zero += b.sampled_zero;
  a->sampled_whole += b.sampled_whole;
  a->whole_known = a->whole_known && b.whole_known;
  a->stored += b.stored;
  a->compressed += b.compressed;
  a->shift = std::max(a->shift, b.shift);
  AddSample(a, b.sample);
  return OkStatus();
}

std::string SerializeSketch(const SpaceSketch& s) {
  Writer w;
  w.Put(kMagic, 8);
  w.U32(kVersion);
  const SketchParams& p = s.params;
  w.U32(p.grain);
  w.U32((p.dedup ? 1 : 0) | (p.compress ? 2 : 0));
  w.U32(static_cast<uint32_t>(p.level));
  w.U32(p.rule.kind);
  w.U32(p.rule.min_saving_bp);
  w.U64(p.seed);
  w.U64(p.modulus);
  w.U64(p.cap);
  w.U32(s.shift);
  for (uint64_t v : {s.images, s.provisioned_bytes, s.used_grains, s.zero_grains, s.data_grains,
                     s.bytes_read, s.sampled_grains, s.sampled_zero}) {
    w.U64(v);
  }
  w.U64(s.whole_known ? s.sampled_whole : kWholeUnknown);
  for (const SizeSums* sums : {&s.stored, &s.compressed}) {
    w.U64(sums->n);
    w.U64(sums->sum);
    w.U64(static_cast<uint64_t>(sums->sum_sq));
    w.U64(static_cast<uint64_t>(sums->sum_sq >> 64));
  }
  w.U64(s.sample.size());
  for (const SampledGrain& g : s.sample) {
    w.U64(g.fp.lo);
    w.U64(g.fp.hi);
    w.U32(g.compressed);
    w.U32(g.stored);
  }
  w.U32(Crc32c(w.out.data(), w.out.size()));
  return w.out;
}

Result<SpaceSketch> ParseSketch(const std::string& in, const std::string& what) {
  auto bad = [&what](const std::string& why) {
    return MakeError(Errc::kInvalidArgument, what + ": not a valid vstack space sketch: " + why);
  };
  if (in.size() < 12 || std::memcmp(in.data(), kMagic, 8) != 0) {
    return bad("no VSTKSKCH signature (write one with vstack space --estimate --sketch FILE)");
  }
  const uint32_t version = LoadLE32(in.data() + 8);
  if (version != kVersion && version != 1) {
    return bad("version " + std::to_string(version) + ", this vstack reads versions 1 and " +
               std::to_string(kVersion));
  }
  if (in.size() < 16) return bad("truncated");
  if (Crc32c(in.data(), in.size() - 4) != LoadLE32(in.data() + in.size() - 4)) {
    return bad("checksum mismatch (the file is truncated or corrupt)");
  }
  Reader r(in, in.size() - 4);
  char header[12];
  r.Get(header, sizeof header);  // signature and version, checked above
  SpaceSketch s;
  SketchParams& p = s.params;
  uint32_t flags = 0, level = 0, kind = 0;
  bool ok = r.U32(&p.grain) && r.U32(&flags) && r.U32(&level) && r.U32(&kind) &&
            r.U32(&p.rule.min_saving_bp) && r.U64(&p.seed) && r.U64(&p.modulus) && r.U64(&p.cap) &&
            r.U32(&s.shift);
  for (uint64_t* v : {&s.images, &s.provisioned_bytes, &s.used_grains, &s.zero_grains,
                      &s.data_grains, &s.bytes_read, &s.sampled_grains, &s.sampled_zero}) {
    ok = ok && r.U64(v);
  }
  if (version == 1) {
    s.whole_known = false;
  } else {
    ok = ok && r.U64(&s.sampled_whole);
    s.whole_known = s.sampled_whole != kWholeUnknown;
    if (!s.whole_known) s.sampled_whole = 0;
  }
  for (SizeSums* sums : {&s.stored, &s.compressed}) {
    uint64_t lo = 0, hi = 0;
    ok = ok && r.U64(&sums->n) && r.U64(&sums->sum) && r.U64(&lo) && r.U64(&hi);
    sums->sum_sq = (static_cast<unsigned __int128>(hi) << 64) | lo;
  }
  uint64_t count = 0;
  ok = ok && r.U64(&count);
  if (!ok) return bad("truncated");
  p.dedup = flags & 1;
  p.compress = flags & 2;
  p.level = static_cast<int32_t>(level);
  if ((flags & ~3u) || p.grain < 512 || (p.grain & (p.grain - 1)) || kind > SizeRule::kMinSaving ||
      p.modulus == 0 || s.shift > kMaxShift || (p.modulus << s.shift) >> s.shift != p.modulus) {
    return bad("parameters out of range");
  }
  p.rule.kind = static_cast<SizeRule::Kind>(kind);
  if (s.zero_grains > s.used_grains || s.sampled_zero > s.sampled_grains ||
      s.sampled_grains > s.data_grains || s.stored.n > s.sampled_grains ||
      s.sampled_whole > s.stored.n) {
    return bad("counts out of range");
  }
  if (count != r.left() / 24 || r.left() % 24 != 0) return bad("the sample's size does not match");
  s.sample.resize(count);
  for (SampledGrain& g : s.sample) {
    r.U64(&g.fp.lo);
    r.U64(&g.fp.hi);
    r.U32(&g.compressed);
    r.U32(&g.stored);
    if (g.compressed == 0 || g.compressed > p.grain || g.stored > p.grain || !Kept(g, s)) {
      return bad("a sampled grain out of range");
    }
  }
  for (size_t i = 1; i < s.sample.size(); ++i) {
    if (!ByFingerprint(s.sample[i - 1], s.sample[i])) return bad("the sample is not sorted");
  }
  return s;
}

}  // namespace vstack
