#include "analysis/space/space_ceph.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "lib/size.h"
#include "lib/spec.h"

namespace vstack {
namespace {

double Ratio(int64_t a, int64_t b) { return b > 0 ? double(a) / double(b) : 0; }

std::string Bytes(int64_t v) {
  return (v < 0 ? "-" : "") + FormatSize(static_cast<uint64_t>(v < 0 ? -v : v));
}

std::string Percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.2f%%", v * 100);
  return buf;
}

std::string Fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

// The pool named `name` in `u`, or kNotFound.
Result<ceph::PoolUsage> PoolIn(const ceph::ClusterUsage& u, const std::string& name) {
  if (const ceph::PoolUsage* p = u.Find(name)) return *p;
  return MakeError(Errc::kNotFound, "ceph: pool '" + name + "' does not exist");
}

}  // namespace

PoolDelta PoolDelta::Between(const ceph::PoolUsage& b, const ceph::PoolUsage& a) {
  auto d = [](uint64_t before, uint64_t after) { return int64_t(after) - int64_t(before); };
  PoolDelta r;
  r.stored = d(b.stored, a.stored);
  r.stored_data = d(b.stored_data, a.stored_data);
  r.stored_omap = d(b.stored_omap, a.stored_omap);
  r.used = d(b.used, a.used);
  r.used_data = d(b.used_data, a.used_data);
  r.used_omap = d(b.used_omap, a.used_omap);
  r.objects = d(b.objects, a.objects);
  return r;
}

double CephPoolMeasure::measured_factor() const { return Ratio(data.used, data.stored); }
double CephPoolMeasure::factor_gap() const {
  return modelled_factor() > 0 ? measured_factor() / modelled_factor() - 1 : 0;
}
double CephPoolMeasure::measured_data_factor() const {
  return Ratio(data.used_data, data.stored_data);
}

Result<CephSpaceResult> MeasureOnCeph(std::vector<SpaceImage>& images, const SpaceOptions& o,
                                      const CephSpaceOptions& c, const SpaceProgress& progress) {
  if (c.pools.empty()) {
    return MakeError(Errc::kInvalidArgument, "--mode=ceph needs the pools to measure (--pool)");
  }
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<ceph::UsageReader> reader,
                          ceph::UsageReader::Connect(c.conf, c.id, c.timeout_s));
  VSTACK_RETURN_IF_ERROR(reader->RequireManager());
  VSTACK_ASSIGN_OR_RETURN(ceph::ClusterUsage usage, reader->Settled(12 * c.timeout_s));
  if (usage.per_pool_osds < usage.osds) {
    return MakeError(Errc::kNotSupported,
                     "ceph: only " + std::to_string(usage.per_pool_osds) + " of " +
                         std::to_string(usage.osds) +
                         " OSDs report what they allocate per pool, so `ceph df` shows no real "
                         "USED (memstore, or BlueStore OSDs made before Nautilus); measure on "
                         "BlueStore OSDs (tools/ceph-up --store bluestore)");
  }
  // Every pool is there and fit before anything is written.
  for (const std::string& name : c.pools) {
    VSTACK_ASSIGN_OR_RETURN(ceph::PoolUsage p, PoolIn(usage, name));
    if (!p.erasure) continue;
    VSTACK_ASSIGN_OR_RETURN(ceph::PoolUsage meta, PoolIn(usage, c.metadata_pool));
    if (meta.erasure) {
      return MakeError(Errc::kInvalidArgument,
                       "--metadata-pool " + c.metadata_pool +
                           " is erasure-coded; RBD image headers need a replicated pool");
    }
  }

  CephSpaceResult result;
  result.min_alloc_size = reader->MinAllocSize();
  result.layers = o.dedup && o.compress ? "dedup+zstd"
                  : o.dedup             ? "dedup"
                  : o.compress          ? "zstd"
                                        : "";
  for (const SpaceImage& img : images) result.logical_bytes += img.data_bytes();
  for (size_t n = 0; n < c.pools.size(); ++n) {
    const std::string& name = c.pools[n];
    if (n > 0) {
      VSTACK_ASSIGN_OR_RETURN(usage, reader->Settled(12 * c.timeout_s));
    }
    VSTACK_ASSIGN_OR_RETURN(ceph::PoolUsage before, PoolIn(usage, name));
    const std::string meta_pool = before.erasure ? c.metadata_pool : name;
    ceph::PoolUsage meta_before;
    if (before.erasure) {
      VSTACK_ASSIGN_OR_RETURN(meta_before, PoolIn(usage, meta_pool));
    }
    std::vector<std::string> made;  // images of this pool (one per dedup domain)
    const std::string prefix = "vstack-space-" + std::to_string(::getpid()) + "-" + name;
    auto backend = [&](uint32_t domain, uint64_t bytes) {
      made.push_back(domain == 0 ? prefix : prefix + "-" + std::to_string(domain));
      SpecPart part{"rbd",
                    meta_pool + "/" + made.back(),
                    {{"create", "on"}, {"size", std::to_string(bytes)}}};
      if (before.erasure) part.options.push_back({"data_pool", name});
      if (!c.conf.empty()) part.options.push_back({"conf", c.conf});
      if (!c.id.empty()) part.options.push_back({"id", c.id});
      part.options.push_back({"timeout", std::to_string(c.timeout_s)});
      return FormatSpecPart(part);
    };
    auto remove_made = [&] {
      for (const std::string& image : made) (void)reader->RemoveImage(meta_pool, image);
    };
    ReplayPhysical physical;
    Result<SpaceCounts> counts = ReplayImagesOnto(images, o, backend, progress, &physical);
    if (!counts) {
      remove_made();
      return Annotate(std::move(counts).error(), "replay onto pool '" + name + "'");
    }
    Result<ceph::ClusterUsage> after = reader->Settled(12 * c.timeout_s);
    if (!after) {
      if (!c.keep) remove_made();
      return std::move(after).error();
    }
    CephPoolMeasure m;
    VSTACK_ASSIGN_OR_RETURN(m.pool, PoolIn(*after, name));
    m.image = meta_pool + "/" + prefix + (made.size() > 1 ? "[-N]" : "");
    m.written_bytes = physical.physical_bytes;
    m.data = PoolDelta::Between(before, m.pool);
    if (before.erasure) {
      VSTACK_ASSIGN_OR_RETURN(ceph::PoolUsage meta_after, PoolIn(*after, meta_pool));
      m.metadata = PoolDelta::Between(meta_before, meta_after);
      m.metadata_apart = true;
    }
    m.kept = c.keep;
    if (!c.keep) {
      for (const std::string& image : made) {
        VSTACK_RETURN_IF_ERROR(reader->RemoveImage(meta_pool, image));
      }
    }
    result.counts = *counts;
    result.physical = physical;
    result.pools.push_back(std::move(m));
    usage = std::move(*after);
  }
  return result;
}

std::string VsanCounterpart(const ceph::PoolUsage& p) {
  if (!p.erasure && p.size == 2) return "RAID-1, FTT=1";
  if (!p.erasure && p.size == 3) return "RAID-1, FTT=2";
  if (p.erasure && p.data_chunks == 3 && p.size == 4) return "RAID-5, 3+1";
  if (p.erasure && p.data_chunks == 4 && p.size == 6) return "RAID-6, 4+2";
  if (p.erasure && p.data_chunks == 2 && p.size == 3) return "RAID-5-like, 2+1";
  return "";
}

CephEndToEnd EndToEndOf(const CephSpaceResult& r, const CephPoolMeasure& m, const SpaceOptions& o) {
  const SpaceReport report = BuildReport(r.counts, o);
  const uint64_t used = report.steps[1].bytes;  // "used": the images' written grains
  const uint64_t with_metadata = report.counts.stored_bytes + report.counts.metadata_bytes;
  CephEndToEnd e;
  const double raw = double(with_metadata) * m.modelled_factor();
  e.modelled = raw > 0 ? double(used) / raw : 0;
  e.measured = m.used_total() > 0 ? double(used) / double(m.used_total()) : 0;
  return e;
}

std::vector<std::string> ExplainGap(const CephPoolMeasure& m, uint64_t min_alloc_size) {
  std::vector<std::string> why;
  const double factor = m.modelled_factor();
  const std::string unit =
      min_alloc_size ? "units of " + FormatSize(min_alloc_size) : "its allocation units";
  // STORED is not counted from the client: Ceph derives it from what BlueStore holds on all
  // the OSDs, divided by the pool's factor. So USED/STORED measures the allocation alone.
  const int64_t scheme_used = std::llround(double(m.data.stored_data) * factor);
  const int64_t alloc_extra = m.data.used_data - scheme_used;
  why.push_back("allocation: BlueStore allocates in " + unit + " on each OSD; the data took " +
                Bytes(m.data.used_data) + " where " + Fixed(factor) + " x STORED is " +
                Bytes(scheme_used) + ": " + Bytes(alloc_extra) + " (" +
                Percent(Ratio(alloc_extra, scheme_used)) +
                ") for the partly filled units at the ends of the " +
                std::to_string(m.data.objects) + " new objects' written extents");
  const int64_t beyond = m.data.stored_data - int64_t(m.written_bytes);
  if (m.pool.erasure) {
    const uint64_t width = uint64_t(m.pool.stripe_unit) * m.pool.data_chunks;
    why.push_back(
        "no holes, whole stripes: an EC object is stored without holes and in whole "
        "stripes of " +
        FormatSize(width) + " (" + std::to_string(m.pool.data_chunks) + " x " +
        FormatSize(m.pool.stripe_unit) +
        " chunks, plus parity): a write past an object's end fills the gap with "
        "zeros, a partial stripe is padded, and STORED counts both; it is " +
        Bytes(beyond) + " beyond the " + Bytes(m.written_bytes) +
        " of data the stack wrote (those zeros and padding, plus the layers' own "
        "metadata if any), and USED pays the pool's factor on it");
  } else {
    why.push_back("STORED is " + Bytes(beyond) + " beyond the " + Bytes(m.written_bytes) +
                  " of data the stack wrote: the layers' own metadata if any, the image's "
                  "object map");
  }
  if (m.metadata_apart) {
    why.push_back(
        "metadata: the image header, id and object map sit in the replicated "
        "metadata pool, omap included: " +
        Bytes(m.metadata.used) + " USED there, not in this pool's factor");
  } else {
    why.push_back("omap: the image header's keys (RBD keeps them in omap, in this pool): " +
                  Bytes(m.data.used_omap) + " USED for " + Bytes(m.data.stored_omap) +
                  " STORED, counted in USED/STORED (BlueStore takes omap sizes from RocksDB's "
                  "estimate, which trails recent writes)");
  }
  return why;
}

}  // namespace vstack
