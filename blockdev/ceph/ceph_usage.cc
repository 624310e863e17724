#include "blockdev/ceph/ceph_usage.h"

#include <rbd/librbd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "blockdev/ceph/ceph_cluster.h"

namespace vstack::ceph {
namespace {

using Json = nlohmann::json;

Result<Json> Parse(const std::string& text, const std::string& what) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return MakeError(Errc::kIo,
                     "ceph: unexpected answer to '" + what + "': " + text.substr(0, 200));
  }
  return j;
}

uint64_t U64(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer())
    return static_cast<uint64_t>(std::max<int64_t>(0, it->get<int64_t>()));
  if (it->is_number()) return static_cast<uint64_t>(std::max(0.0, it->get<double>()));
  if (it->is_string()) return std::strtoull(it->get<std::string>().c_str(), nullptr, 10);
  return 0;
}

// A sequence number from `flush_pg_stats` or `osd last-stat-seq`: a bare number, or
// {"stat_seq": N}.
uint64_t Seq(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_number()) return j.get<uint64_t>();
  if (j.is_object()) return U64(j, "stat_seq");
  return std::strtoull(text.c_str(), nullptr, 10);
}

}  // namespace

std::string PoolUsage::Scheme() const {
  if (!erasure) return "replicated size " + std::to_string(size);
  return "EC " + std::to_string(data_chunks) + "+" + std::to_string(size - data_chunks);
}

const PoolUsage* ClusterUsage::Find(const std::string& pool) const {
  for (const PoolUsage& p : pools) {
    if (p.name == pool) return &p;
  }
  return nullptr;
}

UsageReader::UsageReader(std::shared_ptr<Cluster> cluster) : cluster_(std::move(cluster)) {}
UsageReader::~UsageReader() = default;

Result<std::unique_ptr<UsageReader>> UsageReader::Connect(const std::string& conf,
                                                          const std::string& id, int timeout_s) {
  ConnectParams p;
  p.conf = conf;
  p.id = id;
  p.timeout_s = timeout_s;
  VSTACK_ASSIGN_OR_RETURN(std::shared_ptr<Cluster> cluster, Cluster::Connect("ceph", p));
  return std::unique_ptr<UsageReader>(new UsageReader(std::move(cluster)));
}

Status UsageReader::RequireManager() const {
  VSTACK_ASSIGN_OR_RETURN(std::string text,
                          cluster_->MonCommand(R"({"prefix": "mgr stat", "format": "json"})"));
  VSTACK_ASSIGN_OR_RETURN(Json j, Parse(text, "mgr stat"));
  if (j.value("available", false)) return OkStatus();
  return MakeError(Errc::kNotSupported,
                   "ceph: the cluster at '" + cluster_->MonHost() +
                       "' has no active ceph-mgr; pool usage (`ceph df`) reaches the monitors "
                       "through it (start one: `ceph-mgr -i NAME`, or tools/ceph-up --mgr)");
}

Result<ClusterUsage> UsageReader::Read() const {
  VSTACK_ASSIGN_OR_RETURN(
      std::string text,
      cluster_->MonCommand(R"({"prefix": "df", "detail": "detail", "format": "json"})"));
  VSTACK_ASSIGN_OR_RETURN(Json df, Parse(text, "df detail"));
  VSTACK_ASSIGN_OR_RETURN(
      std::string ls_text,
      cluster_->MonCommand(R"({"prefix": "osd pool ls", "detail": "detail", "format": "json"})"));
  VSTACK_ASSIGN_OR_RETURN(Json ls, Parse(ls_text, "osd pool ls detail"));
  ClusterUsage u;
  const Json stats = df.value("stats", Json::object());
  u.osds = static_cast<uint32_t>(U64(stats, "num_osds"));
  u.per_pool_osds = static_cast<uint32_t>(U64(stats, "num_per_pool_osds"));
  std::map<std::string, uint32_t> profile_k;  // erasure-code profile -> k
  for (const Json& p : df.value("pools", Json::array())) {
    PoolUsage pu;
    pu.name = p.value("name", std::string());
    const Json s = p.value("stats", Json::object());
    pu.stored = U64(s, "stored");
    pu.stored_data = U64(s, "stored_data");
    pu.stored_omap = U64(s, "stored_omap");
    pu.used = U64(s, "bytes_used");
    pu.used_data = U64(s, "data_bytes_used");
    pu.used_omap = U64(s, "omap_bytes_used");
    pu.objects = U64(s, "objects");
    for (const Json& l : ls.is_array() ? ls : Json::array()) {
      if (l.value("pool_name", std::string()) != pu.name) continue;
      pu.erasure = l.value("type", 1) == 3;  // pg_pool_t::TYPE_ERASURE
      pu.size = static_cast<uint32_t>(U64(l, "size"));
      if (!pu.erasure) break;
      const std::string profile = l.value("erasure_code_profile", std::string());
      if (!profile_k.count(profile)) {
        VSTACK_ASSIGN_OR_RETURN(std::string ec_text, cluster_->MonCommand(Json{
                                                         {"prefix", "osd erasure-code-profile get"},
                                                         {"name", profile},
                                                         {"format", "json"}}.dump()));
        VSTACK_ASSIGN_OR_RETURN(Json ec, Parse(ec_text, "osd erasure-code-profile get"));
        profile_k[profile] = static_cast<uint32_t>(U64(ec, "k"));
      }
      pu.data_chunks = std::max<uint32_t>(1, profile_k[profile]);
      pu.stripe_unit = static_cast<uint32_t>(U64(l, "stripe_width") / pu.data_chunks);
      break;
    }
    u.pools.push_back(std::move(pu));
  }
  return u;
}

Result<ClusterUsage> UsageReader::Settled(int timeout_s) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  VSTACK_ASSIGN_OR_RETURN(std::string text,
                          cluster_->MonCommand(R"({"prefix": "osd dump", "format": "json"})"));
  VSTACK_ASSIGN_OR_RETURN(Json dump, Parse(text, "osd dump"));
  std::map<int, uint64_t> wanted;  // up OSD -> the statistics report it just sent
  for (const Json& o : dump.value("osds", Json::array())) {
    if (o.value("up", 0) != 1) continue;
    const int id = o.value("osd", -1);
    VSTACK_ASSIGN_OR_RETURN(std::string seq,
                            cluster_->OsdCommand(id, R"({"prefix": "flush_pg_stats"})"));
    wanted[id] = Seq(seq);
  }
  for (const auto& [id, seq] : wanted) {
    for (;;) {
      VSTACK_ASSIGN_OR_RETURN(
          std::string got,
          cluster_->MonCommand(Json{{"prefix", "osd last-stat-seq"}, {"id", id}}.dump()));
      if (Seq(got) >= seq) break;
      if (std::chrono::steady_clock::now() > deadline) {
        return MakeError(SystemError(ETIMEDOUT), "ceph: the monitors did not get osd." +
                                                     std::to_string(id) + "'s statistics within " +
                                                     std::to_string(timeout_s) +
                                                     " s (is the ceph-mgr running?)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  return Read();
}

Status UsageReader::RemoveImage(const std::string& pool, const std::string& image) const {
  return cluster_->RemoveImage(pool, image);
}

uint64_t UsageReader::MinAllocSize() const {
  Result<std::string> text = cluster_->MonCommand(R"({"prefix": "osd metadata", "id": 0})");
  if (!text) return 0;
  Json m = Json::parse(*text, nullptr, false);
  if (!m.is_object()) return 0;
  if (uint64_t v = U64(m, "bluestore_min_alloc_size")) return v;
  const bool ssd = m.value("bluestore_bdev_rotational", std::string("1")) == "0";
  Result<std::string> conf = cluster_->OsdCommand(
      0, Json{{"prefix", "config get"},
              {"var", ssd ? "bluestore_min_alloc_size_ssd" : "bluestore_min_alloc_size_hdd"},
              {"format", "json"}}
             .dump());
  if (!conf) return 0;
  Json c = Json::parse(*conf, nullptr, false);
  if (!c.is_object() || c.empty()) return 0;
  return U64(c, c.begin().key().c_str());
}

}  // namespace vstack::ceph
