// `vstack space --mode=ceph`: the protection factor measured on a real Ceph cluster. For each
// pool the user names, the images are replayed through the stack (the replay layers, or none)
// onto a fresh RBD image whose data lives in that pool; the pool's STORED and USED (`ceph df
// detail`) are read before and after, once every OSD's statistics have reached the monitors, and
// the difference is set against the factor the model uses for the pool's scheme (replicated
// size 2: 2, like vSAN RAID-1; EC 2+1: 1.5; EC 3+1: 1.33, like vSAN RAID-5).
// docs/space-savings.md, "Measured on a Ceph cluster".
#ifndef VSTACK_ANALYSIS_SPACE_SPACE_CEPH_H_
#define VSTACK_ANALYSIS_SPACE_SPACE_CEPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/space/space.h"
#include "analysis/space/space_images.h"
#include "analysis/space/space_model.h"
#include "analysis/space/space_replay.h"
#include "blockdev/ceph/ceph_usage.h"

namespace vstack {

// One pool's change in `ceph df detail` over the replay.
struct PoolDelta {
  int64_t stored = 0, stored_data = 0, stored_omap = 0;
  int64_t used = 0, used_data = 0, used_omap = 0;
  int64_t objects = 0;
  static PoolDelta Between(const ceph::PoolUsage& before, const ceph::PoolUsage& after);
};

struct CephPoolMeasure {
  ceph::PoolUsage pool;        // the data pool, after (its shape: scheme, k, stripe unit)
  std::string image;           // POOL/IMAGE written
  bool kept = false;           // the image is still there
  uint64_t written_bytes = 0;  // bytes the stack holds on the image: the replay's physical bytes
  PoolDelta data;              // the data pool's delta
  // The image's metadata (header, id, object map) in the metadata pool, for an EC data pool;
  // for a replicated pool it is in `data` (its omap part).
  PoolDelta metadata;
  bool metadata_apart = false;
  double modelled_factor() const { return pool.scheme_factor(); }
  // USED / STORED of the data pool's delta (0 if nothing was stored).
  double measured_factor() const;
  // The same for the data alone (without omap).
  double measured_data_factor() const;
  // USED of everything the image cost (data pool, plus the metadata pool when apart).
  int64_t used_total() const { return data.used + (metadata_apart ? metadata.used : 0); }
  // How far the measured factor is from the modelled one: measured / modelled - 1 (0 when
  // nothing is modelled).
  double factor_gap() const;
};

struct CephSpaceResult {
  SpaceCounts counts;           // as replay reports them (the model's input)
  ReplayPhysical physical;      // the stack's physical bytes against the modelled ones
  uint64_t logical_bytes = 0;   // the images' written data (used bytes)
  uint64_t min_alloc_size = 0;  // BlueStore's allocation unit on the OSDs (0 if unknown)
  std::string layers;           // the replay layers: "dedup+zstd", "dedup", "zstd", "" (rbd: alone)
  std::vector<CephPoolMeasure> pools;
};

// Replays onto every pool in turn and measures. Errors: no cluster reachable (within
// c.timeout_s), a missing pool, an EC pool without overwrites, no mgr, OSDs that do not report
// per-pool allocation (memstore), statistics that do not arrive in time.
Result<CephSpaceResult> MeasureOnCeph(std::vector<SpaceImage>& images, const SpaceOptions& o,
                                      const CephSpaceOptions& c, const SpaceProgress& progress);

// The vSAN scheme with the same raw factor as the pool's ("RAID-1, FTT=1" for replicated size 2,
// "RAID-5, 3+1" for EC 3+1 ...), for the "modelled" column; "" when vSAN has none.
std::string VsanCounterpart(const ceph::PoolUsage& pool);

// The end-to-end ratio (the images' used bytes / raw bytes) of one pool: the model's, with the
// pool's factor over the stored data and metadata of `r.counts` under `o`, and the one measured,
// over the USED the image cost.
struct CephEndToEnd {
  double modelled = 0, measured = 0;
};
CephEndToEnd EndToEndOf(const CephSpaceResult& r, const CephPoolMeasure& m, const SpaceOptions& o);

// Why the measured factor differs from the modelled one, one sentence per cause, with the
// figures of `m` (allocation units, EC stripe padding, omap and image metadata).
std::vector<std::string> ExplainGap(const CephPoolMeasure& m, uint64_t min_alloc_size);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_SPACE_CEPH_H_
