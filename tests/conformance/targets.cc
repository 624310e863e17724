// Every backend and stack the conformance suite runs against. Add your layer here.
#include "lib/registry.h"
#include "tests/testing/conformance.h"

namespace vstack::testing {
namespace {

std::string Expand(std::string spec, const std::string& dir) {
  for (size_t pos; (pos = spec.find("{dir}")) != std::string::npos;) spec.replace(pos, 5, dir);
  return spec;
}

}  // namespace

ConformanceTarget SpecTarget(std::string name, std::string spec, std::string reopen_spec,
                             std::function<void(const std::string& dir)> prepare) {
  ConformanceTarget t;
  t.name = std::move(name);
  t.open = [spec, prepare](const std::string& dir) {
    if (prepare) prepare(dir);
    return Open(Expand(spec, dir));
  };
  if (!reopen_spec.empty()) {
    t.reopen = [reopen_spec](const std::string& dir) { return Open(Expand(reopen_spec, dir)); };
  }
  return t;
}

std::vector<ConformanceTarget>& ConformanceTargets() {
  static std::vector<ConformanceTarget> targets;
  return targets;
}

ConformanceRegistrar::ConformanceRegistrar(std::vector<ConformanceTarget> targets) {
  for (auto& t : targets) ConformanceTargets().push_back(std::move(t));
}

namespace {

ConformanceTarget NullTarget() {
  ConformanceTarget t = SpecTarget("null", "null:64M");
  t.stores_data = false;
  return t;
}

}  // namespace

VSTACK_CONFORMANCE_TARGETS(backends, {
    SpecTarget("memory", "memory:64M"),
    SpecTarget("memory_4k", "memory:64M,block=4096"),
    SpecTarget("memory_prefill", "memory:64M,prefill=on"),
    NullTarget(),
    SpecTarget("file", "file:{dir}/t.img,create=on,size=64M", "file:{dir}/t.img"),
    SpecTarget("file_direct", "file:{dir}/t.img,create=on,size=64M,direct=on",
               "file:{dir}/t.img,direct=on"),
    SpecTarget("file_4k", "file:{dir}/t.img,create=on,size=64M,block=4096",
               "file:{dir}/t.img,block=4096"),
    SpecTarget("uring", "uring:{dir}/t.img,create=on,size=64M", "uring:{dir}/t.img"),
    SpecTarget("uring_direct", "uring:{dir}/t.img,create=on,size=64M,direct=on,entries=16",
               "uring:{dir}/t.img,direct=on"),
});

VSTACK_CONFORMANCE_TARGETS(passthrough, {
    SpecTarget("passthrough_memory", "passthrough+memory:64M"),
    SpecTarget("passthrough_x2_uring", "passthrough+passthrough+uring:{dir}/t.img,create=on,size=64M",
               "passthrough+passthrough+uring:{dir}/t.img"),
});

// The emulation layers at small delays: their timing must not change a single result.
VSTACK_CONFORMANCE_TARGETS(emulation, {
    SpecTarget("delay_memory", "delay:read=20us,write=30us,flush=10us,qd=4+memory:64M"),
    SpecTarget("delay_lognormal_bw_memory", "delay:latency=lognormal:20us:10us,bw=1G+memory:64M"),
    SpecTarget("hv_memory", "hv:latency=10us,cpu=1us+memory:64M"),
    SpecTarget("ready_memory", "ready:pct=5,stall=100us,quantum=0+memory:64M"),
    SpecTarget("error_never_memory", "error:rate=0+memory:64M"),
    SpecTarget("emulated_guest_file",
               "ready:pct=2,stall=50us,quantum=0+hv:latency=5us+delay:latency=10us,qd=8+"
               "file:{dir}/t.img,create=on,size=64M",
               "ready:pct=2,stall=50us,quantum=0+hv:latency=5us+delay:latency=10us,qd=8+"
               "file:{dir}/t.img"),
});

VSTACK_CONFORMANCE_TARGETS(zstd, {
    SpecTarget("zstd_memory", "zstd:size=64M+memory:96M"),
    SpecTarget("zstd_memory_4k_packed", "zstd:size=64M,rule=packed,open_bins=2+memory:96M,block=4096"),
    SpecTarget("zstd_vsan_osa_fast", "zstd:size=64M,rule=vsan-osa,level=-5+memory:96M"),
    SpecTarget("zstd_grain64k_min_saving", "zstd:grain=64K,size=64M,rule=min-saving=12.5+memory:96M"),
    SpecTarget("zstd_file", "zstd:size=64M+file:{dir}/t.img,create=on,size=96M",
               "zstd+file:{dir}/t.img"),
    SpecTarget("zstd_uring_direct", "zstd:size=64M+uring:{dir}/t.img,create=on,size=96M,direct=on",
               "zstd+uring:{dir}/t.img,direct=on"),
});

VSTACK_CONFORMANCE_TARGETS(crc32c, {
    SpecTarget("crc32c_memory", "crc32c+memory:72M"),
    SpecTarget("crc32c_memory_4k", "crc32c+memory:72M,block=4096"),
    SpecTarget("crc32c_grain64k", "crc32c:grain=64K+memory:72M"),
    SpecTarget("crc32c_file", "crc32c+file:{dir}/t.img,create=on,size=72M", "crc32c+file:{dir}/t.img"),
    SpecTarget("crc32c_uring_direct", "crc32c+uring:{dir}/t.img,create=on,size=72M,direct=on",
               "crc32c+uring:{dir}/t.img,direct=on"),
});

VSTACK_CONFORMANCE_TARGETS(stacked, {
    SpecTarget("dedup_zstd_memory", "dedup:size=64M+zstd+memory:128M"),
    SpecTarget("zstd_dedup_memory", "zstd:size=64M+dedup+memory:128M"),
    SpecTarget("dedup64k_zstd_packed_file",
               "dedup:grain=64K,size=64M+zstd:rule=packed+file:{dir}/t.img,create=on,size=128M",
               "dedup+zstd+file:{dir}/t.img"),
    SpecTarget("crc32c_dedup_zstd_memory", "crc32c+dedup+zstd+memory:160M"),
    SpecTarget("crc32c_dedup_zstd_file", "crc32c+dedup+zstd+file:{dir}/t.img,create=on,size=160M",
               "crc32c+dedup+zstd+file:{dir}/t.img"),
    SpecTarget("zstd_crc32c_passthrough_uring",
               "zstd:size=64M+crc32c+passthrough+uring:{dir}/t.img,create=on,size=96M",
               "zstd+crc32c+passthrough+uring:{dir}/t.img"),
});

}  // namespace vstack::testing

// Transform layers, alone and stacked (issue 4). The device below is larger than the 64 MiB the
// suite needs, for the layers' metadata and copy-on-write headroom.
namespace vstack::testing {

VSTACK_CONFORMANCE_TARGETS(dedup, {
    SpecTarget("dedup_memory", "dedup:size=64M+memory:96M"),
    SpecTarget("dedup_memory_4k", "dedup:size=64M+memory:96M,block=4096"),
    SpecTarget("dedup_grain64k_verify", "dedup:grain=64K,verify=on,size=64M+memory:96M"),
    SpecTarget("dedup_file", "dedup:size=64M+file:{dir}/t.img,create=on,size=96M",
               "dedup+file:{dir}/t.img"),
    SpecTarget("dedup_uring_direct",
               "dedup:size=64M+uring:{dir}/t.img,create=on,size=96M,direct=on",
               "dedup+uring:{dir}/t.img,direct=on"),
});

}  // namespace vstack::testing

// Reopen coverage for the transforms' less common formats: a non-default rule and grain, and
// every transform over a device with 4096-byte logical blocks. The reopen spec names no options
// but the backend's block size: the rest must come from the layer's own superblock.
namespace vstack::testing {

VSTACK_CONFORMANCE_TARGETS(transform_reopen, {
    SpecTarget("zstd_min_saving_file",
               "zstd:grain=64K,size=64M,rule=min-saving=12.5+file:{dir}/t.img,create=on,size=96M",
               "zstd+file:{dir}/t.img"),
    SpecTarget("crc32c_grain64k_file", "crc32c:grain=64K+file:{dir}/t.img,create=on,size=72M",
               "crc32c+file:{dir}/t.img"),
    SpecTarget("dedup_file_4k", "dedup:size=64M+file:{dir}/t.img,create=on,size=96M,block=4096",
               "dedup+file:{dir}/t.img,block=4096"),
    SpecTarget("zstd_file_4k", "zstd:size=64M+file:{dir}/t.img,create=on,size=96M,block=4096",
               "zstd+file:{dir}/t.img,block=4096"),
    SpecTarget("crc32c_file_4k", "crc32c+file:{dir}/t.img,create=on,size=72M,block=4096",
               "crc32c+file:{dir}/t.img,block=4096"),
});

}  // namespace vstack::testing
