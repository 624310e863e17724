#include "blockdev/ceph/ceph_cluster.h"

#include <rbd/librbd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

namespace vstack::ceph {

Error RadosError(const std::string& who, const std::string& what, int rc) {
  return MakeError(SystemError(-rc), who + ": " + what + ": " + std::strerror(-rc));
}

std::vector<OptionInfo> ConnectOptionInfos() {
  return {
      {"conf", "path of ceph.conf (default: $CEPH_CONF, then /etc/ceph/ceph.conf)", ""},
      {"id", "client id, without 'client.'", "admin"},
      {"timeout", "seconds to wait for the monitors before failing (1..300)", "10"},
  };
}

Result<ConnectParams> ParseConnectParams(const OptionValues& o) {
  ConnectParams p;
  p.conf = o.Get("conf");
  p.id = o.Get("id");
  VSTACK_ASSIGN_OR_RETURN(int64_t t, o.Int("timeout", 1, 300));
  p.timeout_s = static_cast<int>(t);
  return p;
}

Result<std::shared_ptr<Cluster>> Cluster::Connect(const std::string& who, const ConnectParams& p) {
  rados_t c = nullptr;
  int rc = rados_create(&c, p.id.empty() ? "admin" : p.id.c_str());
  if (rc < 0) return RadosError(who, "rados_create", rc);
  std::shared_ptr<Cluster> cluster(new Cluster(who, c));
  rc = rados_conf_read_file(c, p.conf.empty() ? nullptr : p.conf.c_str());
  if (rc < 0) {
    return RadosError(who,
                      p.conf.empty() ? "no ceph.conf found (give conf=PATH or set CEPH_CONF)"
                                     : "cannot read ceph.conf '" + p.conf + "'",
                      rc);
  }
  rados_conf_parse_env(c, nullptr);  // CEPH_ARGS, as the ceph tools do
  const std::string t = std::to_string(p.timeout_s);
  for (const char* key : {"client_mount_timeout", "rados_mon_op_timeout"}) {
    rados_conf_set(c, key, t.c_str());
  }
  rc = rados_connect(c);
  if (rc < 0) {
    return RadosError(who,
                      "cannot reach the Ceph monitors at '" + cluster->MonHost() + "' within " + t +
                          " s (timeout=)",
                      rc);
  }
  return cluster;
}

Cluster::~Cluster() { rados_shutdown(cluster_); }

std::string Cluster::MonHost() const {
  char buf[512] = {};
  if (rados_conf_get(cluster_, "mon_host", buf, sizeof(buf) - 1) < 0 || buf[0] == '\0') {
    return "(none configured)";
  }
  return buf;
}

Result<rados_ioctx_t> Cluster::OpenPool(const std::string& pool) const {
  rados_ioctx_t io = nullptr;
  const int rc = rados_ioctx_create(cluster_, pool.c_str(), &io);
  if (rc == -ENOENT) {
    return MakeError(Errc::kNotFound, who_ + ": pool '" + pool + "' does not exist");
  }
  if (rc < 0) return RadosError(who_, "opening pool '" + pool + "'", rc);
  return io;
}

Result<std::string> Cluster::MonCommand(const std::string& json) const {
  const char* cmd[] = {json.c_str()};
  int rc = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    char* out = nullptr;
    char* status = nullptr;
    size_t out_len = 0, status_len = 0;
    rc = rados_mon_command(cluster_, cmd, 1, "", 0, &out, &out_len, &status, &status_len);
    std::string result(out ? out : "", out ? out_len : 0);
    rados_buffer_free(out);
    rados_buffer_free(status);
    if (rc >= 0) return result;
    if (rc != -EPERM) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return RadosError(who_, "mon command " + json, rc);
}

Result<std::string> Cluster::OsdCommand(int osd, const std::string& json) const {
  const char* cmd[] = {json.c_str()};
  char* out = nullptr;
  char* status = nullptr;
  size_t out_len = 0, status_len = 0;
  const int rc =
      rados_osd_command(cluster_, osd, cmd, 1, "", 0, &out, &out_len, &status, &status_len);
  std::string result(out ? out : "", out ? out_len : 0);
  rados_buffer_free(out);
  rados_buffer_free(status);
  if (rc < 0) return RadosError(who_, "osd." + std::to_string(osd) + " command " + json, rc);
  return result;
}

Result<PoolFacts> Cluster::Pool(const std::string& pool) const {
  VSTACK_ASSIGN_OR_RETURN(
      std::string text,
      MonCommand(R"({"prefix": "osd pool ls", "detail": "detail", "format": "json"})"));
  const nlohmann::json pools = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!pools.is_array()) {
    return MakeError(Errc::kIo, who_ + ": unexpected answer to 'osd pool ls detail'");
  }
  for (const auto& p : pools) {
    if (p.value("pool_name", "") != pool) continue;
    PoolFacts f;
    f.name = pool;
    f.erasure = p.value("type", 1) == 3;  // pg_pool_t::TYPE_ERASURE
    f.size = p.value("size", 0u);
    f.stripe_width = f.erasure ? p.value("stripe_width", 0u) : 0;
    f.ec_profile = f.erasure ? p.value("erasure_code_profile", std::string()) : "";
    const std::string flags = p.value("flags_names", std::string());
    f.ec_overwrites = flags.find("ec_overwrites") != std::string::npos;
    return f;
  }
  return MakeError(Errc::kNotFound, who_ + ": pool '" + pool + "' does not exist");
}

Status Cluster::RemoveImage(const std::string& pool, const std::string& image) const {
  VSTACK_ASSIGN_OR_RETURN(rados_ioctx_t io, OpenPool(pool));
  const int rc = rbd_remove(io, image.c_str());
  rados_ioctx_destroy(io);
  if (rc < 0) return RadosError(who_, "removing image '" + pool + "/" + image + "'", rc);
  return OkStatus();
}

Status Cluster::RequireOverwrites(const PoolFacts& pool) const {
  if (!pool.erasure || pool.ec_overwrites) return OkStatus();
  return MakeError(Errc::kNotSupported,
                   who_ + ": erasure-coded pool '" + pool.name +
                       "' refuses partial overwrites; enable them with `ceph osd pool set " +
                       pool.name + " allow_ec_overwrites true` (needs BlueStore OSDs)");
}

}  // namespace vstack::ceph
