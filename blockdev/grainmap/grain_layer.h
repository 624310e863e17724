// The grain-mapped layer base: what every layer that cuts the virtual device into fixed-size
// grains has in common before any data moves (dedup, zstd and crc32c build on it through
// GrainDevice, grain_device.h, which is the header to read to write such a layer).
//
//  - Options: `grain` (a power of two from 4K to 64K) and, for thin layers, `size`, checked
//    once here; an option that disagrees with a formatted device is refused by name.
//  - Layout: FitUnits plans superblock, journal and tables for as many stored units (grains,
//    bins) as the device below holds after the metadata they need.
//  - Opening: OpenSuperblock checks the device below and reads the superblock (nullopt: blank).
//    A blank device below is formatted only if it is fresh (BlockDevice::fresh: created by this
//    open) or the spec says format=on; otherwise the open fails and says how to format.
//  - GrainLayer: geometry (size, grain as physical block and optimal transfer, 1 MiB transfers)
//    and capabilities (the layer's own, plus persistence and thread safety from below).
#ifndef VSTACK_BLOCKDEV_GRAINMAP_GRAIN_LAYER_H_
#define VSTACK_BLOCKDEV_GRAINMAP_GRAIN_LAYER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "blockdev/metastore/superblock.h"
#include "lib/layer.h"
#include "lib/registry.h"

namespace vstack {

// The largest grain a grain layer accepts.
inline constexpr uint32_t kMaxGrainBytes = 64 << 10;

// True for the grain sizes grain layers accept: powers of two from 4 KiB to kMaxGrainBytes.
bool ValidGrain(uint64_t grain);

// The options every grain layer shares.
struct GrainOptions {
  uint32_t grain = 4096;
  bool grain_given = false;  // else a formatted device keeps its own grain
  uint64_t size = 0;         // virtual size (thin layers); default: the device below, in grains
  bool size_given = false;
  bool format = false;  // format=on: format a device below that holds no superblock
};

// The `format` option every grain layer declares.
OptionInfo FormatOptionInfo();

// Parses `grain` and, if `with_size`, `size` (a positive multiple of the grain). Errors name
// `layer` and the option.
Result<GrainOptions> ParseGrainOptions(const OptionValues& values, uint64_t lower_size,
                                       const char* layer, bool with_size);

// "<layer>: option '<option>': the device was formatted with <option>=<stored>, not <given>".
Error FormattedWith(const char* layer, const std::string& option, const std::string& stored,
                    const std::string& given);

// The journal size of a layer over `lower_size` bytes: 1/256 of it, from 1 MiB to 64 MiB.
uint64_t GrainJournalBytes(uint64_t lower_size);

// Fits the most units of `unit_bytes` (at most `max_units`) that the device below holds after
// the metadata `plan(units)` lays out (the superblock it returns gives data_offset). kNoSpace
// with `too_small` when not even one unit fits.
struct UnitLayout {
  Superblock sb;
  uint64_t units = 0;
};
Result<UnitLayout> FitUnits(uint64_t lower_size, uint32_t unit_bytes, uint64_t max_units,
                            const std::function<Superblock(uint64_t units)>& plan,
                            const std::string& too_small);

// The start of every grain layer's Open: the device below must be thread-safe; a read-only
// device below makes the layer read-only; the superblock is read (nullopt: a blank device).
// A writable open of a blank device that is neither fresh nor opened with `format` (format=on)
// fails with Errc::kNotFound and a message that says how to format it: the first 8 KiB of a
// disk being zero (or holding only a format's torn first write) does not mean that the rest
// holds nothing. A device that holds other data (no superblock magic in either slot: a
// partition table, a file system) is formatted only with `format` in a writable open, and
// otherwise refused (Errc::kInvalidArgument) with the same advice; a damaged superblock of this
// layer is never formatted over.
struct OpenedBelow {
  bool read_only = false;
  uint64_t lower_size = 0;
  std::optional<Superblock> sb;
};
Result<OpenedBelow> OpenSuperblock(BlockDevice& lower, const char* magic, const char* layer,
                                   bool read_only, bool format);
// Check's finding about a superblock slot that does not decode (Superblock::other_slot_problem,
// not empty): `rewrite` writes the superblock again as its next generation, which goes to that
// slot. With a repair mode on a writable device it is called and the finding is repaired;
// otherwise it is a note (a crash during a superblock write leaves one: not corruption).
void CheckSuperblockSlots(const Superblock& sb, const std::string& layer, bool repair,
                          const std::function<Status()>& rewrite, CheckResult* out);

// The error for a device below that is smaller than its valid superblock of `layer` says it
// held (`needed` bytes: where the data area it describes ends, saturated at 2^64 - 1): the image
// looks truncated. Errc::kCorruption, naming both sizes. A layer checks this once it has read
// its own fields, before it checks where the metadata lies (ValidateLayout), so that an image
// cut anywhere, even to its first 4 KiB, says so.
Error TruncatedBelow(const std::string& layer, const BlockDevice& lower, uint64_t needed);
// True if `units` of `unit_bytes` from `data_offset` end past `lower_size` (overflow-safe).
bool DataAreaPastEnd(uint64_t data_offset, uint64_t units, uint64_t unit_bytes,
                     uint64_t lower_size);
// data_offset + units * unit_bytes, saturated at 2^64 - 1: what TruncatedBelow names.
uint64_t DataAreaEnd(uint64_t data_offset, uint64_t units, uint64_t unit_bytes);

class GrainLayer : public Layer {
 public:
  uint32_t grain() const { return grain_; }
  // Byte offset on the device below where stored data starts.
  uint64_t data_offset() const { return data_offset_; }
  // Fresh if this open formatted the device below (its content is new).
  bool fresh() const override { return formatted_now_; }

 protected:
  // Presents `size` bytes in grains of `grain`. Capabilities: `own` (reading), plus `writes`
  // and those of `writes_from_below` the device below has, unless read-only or the device
  // below cannot write; plus persistence and thread safety from below.
  GrainLayer(std::string kind, DevicePtr lower, uint32_t grain, uint64_t size,
             uint64_t data_offset, Capabilities own, Capabilities writes, bool read_only,
             Capabilities writes_from_below = 0);

  // Called by Open when it formatted the device below.
  void set_formatted_now() { formatted_now_ = true; }
  // Called by Open when it presents a blank device below, read-only, as an empty one (it
  // writes nothing, so it cannot format it).
  void set_presented_blank() { presented_blank_ = true; }
  // A check's answer for a layer presented blank: kNotFound, since the device below is not one
  // of this layer's (nothing says it ever was: its first 8 KiB are zero, or hold a format's torn
  // first write), so there is nothing to check. OK for every other layer. `vstack check` said "No
  // errors were found" of any blank file under any grain layer, and read all of it under crc32c (17
  // s for 16 GiB of holes).
  Status RefuseCheckIfBlank() const;

 private:
  const uint32_t grain_;
  const uint64_t data_offset_;
  bool formatted_now_ = false;
  bool presented_blank_ = false;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_GRAINMAP_GRAIN_LAYER_H_
