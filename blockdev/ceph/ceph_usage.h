// What a Ceph cluster really stores and allocates per pool, as `ceph df detail` reports it, for
// `vstack space --mode=ceph` (analysis/space/space_ceph.h). No librados types here.
//
// USED is the bytes the OSDs' object stores allocated for the pool on every OSD (BlueStore
// reports this per pool); STORED is the pool's data as BlueStore holds it, divided by the pool's
// raw factor (size for a replicated pool, (k+m)/k for EC). Both reach the monitors from the OSDs
// through the ceph-mgr, so the figures need a running mgr and are only as fresh as the OSDs' last
// report: Settled() makes every OSD report (`ceph tell osd.N flush_pg_stats`) and waits until
// the monitors have those reports (`ceph osd last-stat-seq osd.N`), as Ceph's own tests do.
#ifndef VSTACK_BLOCKDEV_CEPH_CEPH_USAGE_H_
#define VSTACK_BLOCKDEV_CEPH_CEPH_USAGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/errors.h"

namespace vstack::ceph {

class Cluster;

// One pool's shape and usage.
struct PoolUsage {
  std::string name;
  bool erasure = false;
  uint32_t size = 0;         // replicas, or k + m
  uint32_t data_chunks = 1;  // k (EC); 1 for a replicated pool
  uint32_t stripe_unit = 0;  // EC: bytes per chunk of a stripe (stripe_width / k); else 0
  // `ceph df detail`: STORED (data + omap), USED (allocated on every OSD: data + omap), objects.
  uint64_t stored = 0, stored_data = 0, stored_omap = 0;
  uint64_t used = 0, used_data = 0, used_omap = 0;
  uint64_t objects = 0;

  // Raw bytes per stored byte by the pool's scheme alone: size, or (k+m)/k.
  double scheme_factor() const { return double(size) / double(data_chunks ? data_chunks : 1); }
  // "replicated size 2", "EC 2+1".
  std::string Scheme() const;
};

struct ClusterUsage {
  uint32_t osds = 0;
  // OSDs whose object store reports per-pool allocation (BlueStore since Nautilus). When fewer
  // than `osds`, USED is not measured: Ceph then shows the PGs' logical bytes instead.
  uint32_t per_pool_osds = 0;
  std::vector<PoolUsage> pools;
  const PoolUsage* Find(const std::string& pool) const;
};

// A client connection that reads pool usage and removes RBD images.
class UsageReader {
 public:
  // conf: ceph.conf ("" = $CEPH_CONF, then the default search); id: client id ("" = admin);
  // a missing or unreachable cluster fails within `timeout_s`, naming the monitors.
  static Result<std::unique_ptr<UsageReader>> Connect(const std::string& conf,
                                                      const std::string& id, int timeout_s);
  ~UsageReader();
  UsageReader(const UsageReader&) = delete;
  UsageReader& operator=(const UsageReader&) = delete;

  // Fails (kNotSupported, naming the fix) when the cluster has no active ceph-mgr.
  Status RequireManager() const;
  // The usage once every up OSD's latest statistics have reached the monitors (waits at most
  // `timeout_s`, then fails with ETIMEDOUT).
  Result<ClusterUsage> Settled(int timeout_s) const;
  // Removes image `pool`/`image` (its data, also in a separate data pool).
  Status RemoveImage(const std::string& pool, const std::string& image) const;
  // bluestore_min_alloc_size the OSDs use (read from osd.0's metadata or config); 0 if unknown.
  uint64_t MinAllocSize() const;

 private:
  explicit UsageReader(std::shared_ptr<Cluster> cluster);
  Result<ClusterUsage> Read() const;

  std::shared_ptr<Cluster> cluster_;
};

}  // namespace vstack::ceph

#endif  // VSTACK_BLOCKDEV_CEPH_CEPH_USAGE_H_
