#include "blockdev/grainmap/grain_layer.h"

#include <algorithm>

#include "lib/size.h"
#include "lib/sync_io.h"

namespace vstack {

bool ValidGrain(uint64_t grain) {
  return grain >= 4096 && grain <= kMaxGrainBytes && (grain & (grain - 1)) == 0;
}

Result<GrainOptions> ParseGrainOptions(const OptionValues& values, uint64_t lower_size,
                                       const char* layer, bool with_size) {
  GrainOptions o;
  VSTACK_ASSIGN_OR_RETURN(uint64_t grain, values.Size("grain"));
  if (!ValidGrain(grain)) {
    return BadOptionValue(layer, "grain",
                          std::to_string(grain) + " is not a power of two from 4K to 64K");
  }
  o.grain = static_cast<uint32_t>(grain);
  o.grain_given = values.Has("grain");
  VSTACK_ASSIGN_OR_RETURN(o.format, values.Bool("format"));
  if (!with_size) return o;
  o.size_given = values.Has("size");
  if (o.size_given) {
    VSTACK_ASSIGN_OR_RETURN(o.size, values.Size("size"));
    if (o.size == 0 || o.size % o.grain) {
      return BadOptionValue(layer, "size",
                            std::to_string(o.size) + " is not a positive multiple of the grain (" +
                                std::to_string(o.grain) + ")");
    }
  } else {
    o.size = lower_size / o.grain * o.grain;
  }
  return o;
}

OptionInfo FormatOptionInfo() {
  return {"format",
          "format the device below if it holds no superblock of this layer (erases its "
          "content); without it, only a device that this command created is formatted",
          "off"};
}

Error FormattedWith(const char* layer, const std::string& option, const std::string& stored,
                    const std::string& given) {
  return BadOptionValue(
      layer, option, "the device was formatted with " + option + "=" + stored + ", not " + given);
}

uint64_t GrainJournalBytes(uint64_t lower_size) {
  return std::clamp<uint64_t>(lower_size / 256, 1 << 20, 64 << 20) / kMetaPageSize * kMetaPageSize;
}

Result<UnitLayout> FitUnits(uint64_t lower_size, uint32_t unit_bytes, uint64_t max_units,
                            const std::function<Superblock(uint64_t units)>& plan,
                            const std::string& too_small) {
  uint64_t units = std::min<uint64_t>(lower_size / unit_bytes, max_units);
  for (;;) {
    Superblock sb = plan(units);
    const uint64_t need = sb.data_offset + units * unit_bytes;
    if (need <= lower_size && units > 0) return UnitLayout{std::move(sb), units};
    const uint64_t excess =
        need > lower_size ? (need - lower_size + unit_bytes - 1) / unit_bytes : 1;
    if (excess >= units) return MakeError(Errc::kNoSpace, too_small);
    units -= excess;
  }
}

Error TruncatedBelow(const std::string& layer, const BlockDevice& lower, uint64_t needed) {
  const uint64_t size = lower.geometry().size_bytes;
  return MakeError(Errc::kCorruption,
                   layer + ": the device below (" + lower.Describe() + ") looks truncated: its " +
                       layer + " superblock says it held at least " + std::to_string(needed) +
                       " bytes (" + FormatSize(needed) + "), it has " + std::to_string(size) +
                       " (" + FormatSize(size) + ") now");
}

bool DataAreaPastEnd(uint64_t data_offset, uint64_t units, uint64_t unit_bytes,
                     uint64_t lower_size) {
  return data_offset > lower_size || units > (lower_size - data_offset) / unit_bytes;
}

uint64_t DataAreaEnd(uint64_t data_offset, uint64_t units, uint64_t unit_bytes) {
  constexpr uint64_t kMax = ~uint64_t{0};
  if (units != 0 && unit_bytes > kMax / units) return kMax;
  const uint64_t bytes = units * unit_bytes;
  return data_offset > kMax - bytes ? kMax : data_offset + bytes;
}

Result<OpenedBelow> OpenSuperblock(BlockDevice& lower, const char* magic, const char* layer,
                                   bool read_only, bool format) {
  const std::string who = layer;
  if (!lower.Has(kCapThreadSafe)) {
    return MakeError(Errc::kNotSupported, who + ": the device below must support several queues");
  }
  OpenedBelow o;
  o.read_only = read_only || lower.read_only();
  o.lower_size = lower.geometry().size_bytes;
  bool other_data = false;  // data below, but no superblock of this layer
  std::string other_layer;  // the magic of another layer's valid superblock there
  bool blank = false;       // both slots zero (else, with kNotFound, a torn first format)
  Result<Superblock> sb = [&] {
    SyncIo io(lower);
    Result<Superblock> r = ReadSuperblock(io, magic, who);
    other_data = !r && r.error().code != make_error_code(Errc::kNotFound) &&
                 !HoldsSuperblockMagic(io, magic);
    if (other_data) other_layer = ValidSuperblockMagic(io);
    if (!r && !other_data) blank = SuperblockSlotsBlank(io);
    return r;
  }();
  const std::string below =
      who + ": the device below (" + lower.Describe() + ") holds no " + who + " superblock";
  const std::string how = "To format it (erasing its content), add format=on to the " + who +
                          " part of the spec, e.g. '" + who + ":format=on+...'";
  if (sb) {
    o.sb = std::move(*sb);
  } else if (!other_layer.empty()) {
    // As mkfs refuses a device that holds a file system it knows: another vstack layer's
    // device (dedup, zstd, crc32c) is never formatted over, format=on or not.
    return MakeError(Errc::kInvalidArgument,
                     below + " but a valid superblock of another vstack layer ('" + other_layer +
                         "'), which it does not format over, even with format=on: open it with "
                         "that layer, or erase the device's first 8 KiB to reuse it");
  } else if (other_data && o.read_only) {
    return MakeError(Errc::kInvalidArgument, below + " but other data: it is not a " + who +
                                                 " device (" + sb.error().message + ")");
  } else if (other_data && !format) {
    return MakeError(Errc::kInvalidArgument, below + " but other data, so it is not " +
                                                 "formatted (" + sb.error().message + "). " + how);
  } else if (!other_data && sb.error().code != make_error_code(Errc::kNotFound)) {
    return std::move(sb).error();  // a damaged superblock of this layer: never formatted over
  } else if (!other_data && !o.read_only && !format && !lower.fresh()) {
    const std::string found = blank ? "its first 8 KiB are zero"
                                    : "its first 8 KiB hold only the start of a " + who +
                                          " superblock that a format never finished";
    return MakeError(Errc::kNotFound, below +
                                          ", and this command did not create it, so it is not "
                                          "formatted: " +
                                          found + ", which does not make the rest empty. " + how);
  }
  return o;
}

Status GrainLayer::RefuseCheckIfBlank() const {
  if (!presented_blank_) return OkStatus();
  // Without the layer's name: a check's error is printed after it.
  return MakeError(Errc::kNotFound,
                   "the device below (" + lower_device().Describe() + ") holds no " + kind() +
                       " superblock (its first 8 KiB are zero, or hold only the start of a "
                       "format that never finished), so it is not a " +
                       kind() + " device, and there is nothing to check");
}

void CheckSuperblockSlots(const Superblock& sb, const std::string& layer, bool repair,
                          const std::function<Status()>& rewrite, CheckResult* out) {
  if (sb.other_slot_problem.empty()) return;
  const std::string what = layer + ": a superblock slot does not decode (" + sb.other_slot_problem +
                           "): torn by a crash during its write, or damaged; the other slot, "
                           "generation " +
                           std::to_string(sb.generation) + ", is in use";
  if (!repair) {
    out->messages.push_back(what +
                            "; the next superblock write (`vstack check -r leaks` or a "
                            "checkpoint) rewrites it");
    return;
  }
  if (Status s = rewrite(); !s) {
    out->Corruption(what + "; rewriting it failed: " + s.error().ToString());
    return;
  }
  out->messages.push_back("Repaired: " + what + "; rewritten");
  ++out->repaired;
}

GrainLayer::GrainLayer(std::string kind, DevicePtr lower, uint32_t grain, uint64_t size,
                       uint64_t data_offset, Capabilities own, Capabilities writes,
                       bool read_only, Capabilities writes_from_below)
    : Layer(std::move(kind), std::move(lower)), grain_(grain), data_offset_(data_offset) {
  Geometry& g = mutable_geometry();
  g.size_bytes = size;
  g.physical_block = std::max<uint32_t>(g.physical_block, grain);
  g.optimal_transfer = grain;
  g.max_transfer = std::max<uint64_t>(1 << 20, grain);
  const Capabilities below = lower_device().capabilities();
  Capabilities caps = own | (below & (kCapPersistent | kCapThreadSafe));
  if (!read_only && (below & kCapWrite)) caps |= writes | (below & writes_from_below);
  set_capabilities(caps);
}

}  // namespace vstack
