// The conformance suite against the rbd: and rados: backends, on the cluster named by
// $CEPH_CONF (tests/ceph/with-cluster starts a throwaway one). Every test gets its own image or
// object prefix, named after its temporary directory, so tests never see each other's data.
#include <string>

#include "formats/vhd/vhd_create.h"
#include "lib/registry.h"
#include "tests/testing/conformance.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

// A name unique to this test: the last component of its temporary directory.
std::string Unique(const std::string& dir) { return dir.substr(dir.find_last_of('/') + 1); }

std::string Fill(std::string spec, const std::string& dir) {
  for (size_t pos; (pos = spec.find("{name}")) != std::string::npos;) {
    spec.replace(pos, 6, Unique(dir));
  }
  return spec;
}

ConformanceTarget CephTarget(std::string name, std::string spec, std::string reopen_spec) {
  ConformanceTarget t;
  t.name = std::move(name);
  t.open = [spec](const std::string& dir) { return Open(Fill(spec, dir)); };
  t.reopen = [reopen_spec](const std::string& dir) { return Open(Fill(reopen_spec, dir)); };
  return t;
}

// dedup+zstd+vhd+rbd: a dynamic VHD written onto a new RBD image (with its data in the EC
// pool), the transform layers formatted on top of it.
ConformanceTarget VhdOnRbdTarget() {
  ConformanceTarget t;
  t.name = "ceph_dedup_zstd_vhd_rbd_ec";
  t.open = [](const std::string& dir) -> Result<DevicePtr> {
    vhd::CreateParams p;
    p.requested_size = 2 * kConformanceSize;
    const uint64_t bytes = (vhd::NewImageFileSize(p) + 511) / 512 * 512;
    VSTACK_ASSIGN_OR_RETURN(
        DevicePtr rbd,
        Open(Fill("rbd:rbd/{name},create=on,data_pool=ec21,size=" + std::to_string(bytes), dir)));
    VSTACK_RETURN_IF_ERROR(vhd::WriteNewImage(*rbd, p));
    VSTACK_RETURN_IF_ERROR(rbd->Close());
    // The VHD was written just above: dedup and zstd format it because the spec says so.
    return Open(Fill("dedup:size=64M,format=on+zstd:format=on+vhd+rbd:rbd/{name}", dir));
  };
  t.reopen = [](const std::string& dir) {
    return Open(Fill("dedup+zstd+vhd+rbd:rbd/{name}", dir));
  };
  return t;
}

VSTACK_CONFORMANCE_TARGETS(
    ceph,
    {
        CephTarget("ceph_rbd_replicated", "rbd:rbd/{name},create=on,size=64M", "rbd:rbd/{name}"),
        CephTarget("ceph_rbd_ec", "rbd:rbd/{name},create=on,size=64M,data_pool=ec21",
                   "rbd:rbd/{name}"),
        CephTarget("ceph_rados_replicated", "rados:rep/{name},create=on,size=64M",
                   "rados:rep/{name}"),
        // Small objects: most requests span objects and are split.
        CephTarget("ceph_rados_ec_64k_objects",
                   "rados:ec21/{name},create=on,size=64M,object_size=64K", "rados:ec21/{name}"),
        VhdOnRbdTarget(),
    });

}  // namespace
}  // namespace vstack::testing
