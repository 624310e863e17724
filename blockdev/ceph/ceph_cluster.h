// A connection to a Ceph cluster (librados), shared by the rbd: and rados: backends, and the
// facts about one pool that decide whether and how a block device can live on it.
//
// Connecting reads ceph.conf (conf=, else $CEPH_CONF, else librados's default search) and sets
// client_mount_timeout and rados_mon_op_timeout to `timeout_s`, so a missing or unreachable
// cluster fails within that bound with a message naming the monitors it tried, instead of
// hanging. librados stays private to this folder.
#ifndef VSTACK_BLOCKDEV_CEPH_CEPH_CLUSTER_H_
#define VSTACK_BLOCKDEV_CEPH_CEPH_CLUSTER_H_

#include <rados/librados.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/errors.h"
#include "lib/registry.h"

namespace vstack::ceph {

struct ConnectParams {
  std::string conf;    // path of ceph.conf; "" = $CEPH_CONF or librados's default search
  std::string id;      // client id without "client." ("admin" when empty)
  int timeout_s = 10;  // client_mount_timeout and rados_mon_op_timeout
};

// The options every Ceph backend takes (conf=, id=, timeout=), and their parser.
std::vector<OptionInfo> ConnectOptionInfos();
Result<ConnectParams> ParseConnectParams(const OptionValues& o);

// What a pool is, from the OSD map (`ceph osd pool ls detail`).
struct PoolFacts {
  std::string name;
  bool erasure = false;        // erasure-coded (else replicated)
  bool ec_overwrites = false;  // allow_ec_overwrites is set
  uint32_t size = 0;           // replicas, or k+m
  uint32_t stripe_width = 0;   // EC: k * stripe_unit bytes; 0 for replicated pools
  std::string ec_profile;      // EC: the erasure-code profile's name
};

// One connected cluster handle. Thread-safe (librados is).
class Cluster {
 public:
  // Connects; `who` ("rbd", "rados") prefixes error messages.
  static Result<std::shared_ptr<Cluster>> Connect(const std::string& who, const ConnectParams& p);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Opens an I/O context on `pool`; a missing pool is Errc::kNotFound naming the pool.
  Result<rados_ioctx_t> OpenPool(const std::string& pool) const;
  // Looks the pool up in the OSD map.
  Result<PoolFacts> Pool(const std::string& pool) const;
  // kNotSupported with the command that fixes it, unless `pool` takes partial overwrites
  // (replicated, or EC with allow_ec_overwrites).
  Status RequireOverwrites(const PoolFacts& pool) const;
  // Removes RBD image `pool`/`image`, with its data (in a separate data pool too).
  Status RemoveImage(const std::string& pool, const std::string& image) const;

  rados_t handle() const { return cluster_; }
  const std::string& who() const { return who_; }
  // "mon_host" as configured, for messages.
  std::string MonHost() const;
  // A JSON mon command; retried on the spurious EPERM ("wrong fsid") Debian's 16.2 client
  // returns when a command races the first monmap. The reply's output.
  Result<std::string> MonCommand(const std::string& json) const;
  // A JSON command to OSD `osd` (`ceph tell osd.N ...`). The reply's output.
  Result<std::string> OsdCommand(int osd, const std::string& json) const;

 private:
  Cluster(std::string who, rados_t cluster) : who_(std::move(who)), cluster_(cluster) {}

  std::string who_;
  rados_t cluster_;
};

// "<who>: <what>: <strerror(-rc)>" as an Error with the errno code.
Error RadosError(const std::string& who, const std::string& what, int rc);

}  // namespace vstack::ceph

#endif  // VSTACK_BLOCKDEV_CEPH_CEPH_CLUSTER_H_
