#include "analysis/space/space_model.h"

#include <cstdlib>
#include <limits>

#include "blockdev/dedup/dedup_device.h"
#include "blockdev/zstd/grain_codec.h"
#include "blockdev/zstd/zstd_device.h"

namespace vstack {

Status ParseScope(const std::string& text, SpaceOptions* o) {
  if (text == "global") {
    o->scope = SpaceOptions::Scope::kGlobal;
  } else if (text == "image") {
    o->scope = SpaceOptions::Scope::kImage;
  } else if (text.rfind("groups=", 0) == 0) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(text.c_str() + 7, &end, 10);
    if (*end != '\0' || n == 0 || n > 1024) {
      return MakeError(Errc::kInvalidArgument,
                       "--scope " + text + ": expected groups=N with N from 1 to 1024");
    }
    o->scope = SpaceOptions::Scope::kGroups;
    o->groups = static_cast<uint32_t>(n);
  } else {
    return MakeError(Errc::kInvalidArgument,
                     "--scope '" + text + "' is not one of: global, image, groups=N");
  }
  return OkStatus();
}

Status ParseCodec(const std::string& text, SpaceOptions* o) {
  if (text == "none") {
    o->compress = false;
    return OkStatus();
  }
  if (text.rfind("zstd:", 0) == 0 || text == "zstd") {
    int level = 1;
    if (text != "zstd") {
      char* end = nullptr;
      const long n = std::strtol(text.c_str() + 5, &end, 10);
      if (text.size() == 5 || *end != '\0' || n < MinZstdLevel() || n > MaxZstdLevel()) {
        return MakeError(Errc::kInvalidArgument, "--codec " + text +
                                                     ": the zstd level must be from " +
                                                     std::to_string(MinZstdLevel()) + " to " +
                                                     std::to_string(MaxZstdLevel()));
      }
      level = static_cast<int>(n);
    }
    o->compress = true;
    o->level = level;
    return OkStatus();
  }
  return MakeError(Errc::kInvalidArgument, "--codec '" + text + "' is not zstd:N or none");
}

Status ParseProtection(const std::string& text, SpaceOptions* o) {
  if (ProtectionFactor(text) == 0) {
    return MakeError(Errc::kInvalidArgument,
                     "--protection '" + text + "' is not one of: none, raid1, ftt2, raid5, raid6");
  }
  o->protection = text;
  return OkStatus();
}

double ProtectionFactor(const std::string& p) {
  if (p == "none") return 1.0;
  if (p == "raid1") return 2.0;
  if (p == "ftt2") return 3.0;
  if (p == "raid5") return 4.0 / 3.0;
  if (p == "raid6") return 1.5;
  return 0;
}

std::string DescribeProtection(const std::string& p) {
  if (p == "none") return "no protection";
  if (p == "raid1") return "RAID-1, FTT=1 (2 copies)";
  if (p == "ftt2") return "RAID-1, FTT=2 (3 copies)";
  if (p == "raid5") return "RAID-5 (3+1)";
  if (p == "raid6") return "RAID-6 (4+2)";
  return p;
}

uint32_t DomainCount(const SpaceOptions& o, size_t images) {
  switch (o.scope) {
    case SpaceOptions::Scope::kGlobal:
      return 1;
    case SpaceOptions::Scope::kImage:
      return static_cast<uint32_t>(images);
    case SpaceOptions::Scope::kGroups:
      return std::min<uint32_t>(o.groups, static_cast<uint32_t>(images));
  }
  return 1;
}

uint32_t DomainOf(const SpaceOptions& o, size_t index, size_t images) {
  return static_cast<uint32_t>(index % DomainCount(o, images));
}

SpaceCounts& SpaceCounts::operator+=(const SpaceCounts& o) {
  provisioned_bytes += o.provisioned_bytes;
  used_grains += o.used_grains;
  zero_grains += o.zero_grains;
  unique_grains += o.unique_grains;
  compressed_bytes += o.compressed_bytes;
  stored_bytes += o.stored_bytes;
  metadata_bytes += o.metadata_bytes;
  return *this;
}

void AddMetadata(const SpaceOptions& o, uint32_t grain, SpaceCounts* c) {
  if (o.dedup) {
    c->metadata_bytes += DedupDevice::kFormat.MetadataBytes(c->used_grains, c->unique_grains);
  }
  if (o.compress) {
    const uint64_t bins = (c->stored_bytes + grain - 1) / grain;
    const uint64_t stored_grains = o.dedup ? c->unique_grains : c->used_grains;
    c->metadata_bytes += ZstdDevice::kFormat.MetadataBytes(stored_grains, bins);
  }
  if (o.checksum) c->metadata_bytes += (c->stored_bytes + 4095) / 4096 * 5;
}

double ReductionRatio(double before, double after) {
  if (after > 0) return before / after;
  return before > 0 ? std::numeric_limits<double>::infinity() : 1.0;
}

SpaceReport BuildReport(const SpaceCounts& c, const SpaceOptions& o) {
  SpaceReport r;
  r.counts = c;
  const uint64_t g = o.grain;
  const uint64_t used = c.used_grains * g;
  const uint64_t after_zero = (c.used_grains - c.zero_grains) * g;
  const uint64_t after_dedup = c.unique_grains * g;
  const uint64_t after_compression = c.stored_bytes;
  const uint64_t with_metadata = after_compression + c.metadata_bytes;
  const uint64_t protected_bytes = static_cast<uint64_t>(
      static_cast<double>(with_metadata) * ProtectionFactor(o.protection) + 0.5);
  auto add = [&r](std::string key, std::string label, uint64_t bytes) {
    const double ratio = r.steps.empty() ? 1.0
                                         : ReductionRatio(static_cast<double>(r.steps.back().bytes),
                                                          static_cast<double>(bytes));
    r.steps.push_back({std::move(key), std::move(label), bytes, ratio, bytes, bytes, ratio, ratio});
  };
  add("provisioned", "provisioned", c.provisioned_bytes);
  add("used", "used before (written)", used);
  add("after_zero", "after zero elimination", after_zero);
  add("after_dedup", o.dedup ? "after dedup" : "after dedup (off)", after_dedup);
  add("after_compression",
      o.compress ? "after compression (" + FormatSizeRule(o.rule) + ")" : "after compression (off)",
      after_compression);
  add("with_metadata", "with metadata", with_metadata);
  add("after_protection", "after protection: " + DescribeProtection(o.protection), protected_bytes);
  r.data_reduction = ReductionRatio(static_cast<double>(used), static_cast<double>(with_metadata));
  r.overall = ReductionRatio(static_cast<double>(used), static_cast<double>(protected_bytes));
  r.data_reduction_low = r.data_reduction_high = r.data_reduction;
  r.overall_low = r.overall_high = r.overall;
  return r;
}

}  // namespace vstack
