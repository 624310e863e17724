// crc32c: a CRC-32C per grain, stored persistently and verified on every read.
//
// Spec: crc32c[:grain=4K,format=on]+<lower>
//
// An in-place grain layer (blockdev/grainmap/grain_device.h): data stays where it is on the
// device below, after the metadata (superblock, checksum table, dirty-region table). What
// crc32c adds to the engine: the checksum of each grain written (its map entry, stored XORed
// with the zero grain's so that never-written pages describe zero grains), the check of every
// grain read (a mismatch completes the read with Errc::kChecksumMismatch, never with the bad
// data; the device counts it and remembers its offset), and crash consistency in the way of
// dm-integrity's bitmap mode (dirty_regions.h), on MetaStore's table pages. Cutting, locks,
// read-modify-write (which verifies the old grain first), reads in one request, the retry of a
// read that raced a write, scrub and reports are the engine's. See docs/layers/crc32c.md.
#ifndef VSTACK_BLOCKDEV_CRC32C_CRC32C_DEVICE_H_
#define VSTACK_BLOCKDEV_CRC32C_CRC32C_DEVICE_H_

#include <atomic>
#include <memory>
#include <mutex>

#include "blockdev/crc32c/dirty_regions.h"
#include "blockdev/grainmap/grain_device.h"
#include "lib/sync_io.h"

namespace vstack {

class Crc32cDevice final : public GrainDevice {
 public:
  static const GrainFormat kFormat;
  static const uint32_t kPerRegion;  // grains per region: the checksums of one table page

  // Opens the crc32c metadata on `lower` (options: grain and format). A blank device is
  // formatted if it is fresh or options.format (format=on) is given, else refused; read-only,
  // it is presented as empty, all zeros. Recomputes the checksums of regions left dirty by a
  // crash.
  static Result<DevicePtr> Open(DevicePtr lower, const GrainOptions& options, bool read_only);

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  std::optional<SpaceUsage> Space() const override;
  // The engine's scrub (every grain against its checksum; repair-all accepts the data's
  // checksums, and persists them), and the dirty-flag pages Load found bad.
  Status Check(CheckMode mode, CheckResult* out) override;
  // A flush: makes data durable and cleans the regions that went quiet. Blocks.
  Status Commit(CommitKind kind) override;

  uint64_t mismatches() const { return Counts().counters[kChecksumErrors]; }
  uint64_t last_mismatch_offset() const { return last_mismatch_.load(); }

  enum Counter : size_t {
    kChecksumErrors = kBaseCounters, kRegionsMarked, kRegionsCleaned
  };

 protected:
  Status CloseLayer() override;

 private:
  Crc32cDevice(DevicePtr lower, uint32_t grain, Superblock sb, bool read_only);

  // The policy (grain_device.h).
  Encoded Encode(QueueState* qs, const GrainWrite& w, const std::byte* bytes) override;
  bool VerifyRead(uint64_t grain, uint64_t entry, const iovec* iov, uint32_t iovcnt,
                  uint64_t off, bool last_try) override;
  Status BeforeWrite(GrainIo& io, uint64_t first, uint64_t count) override;
  void AfterWrite(uint64_t first, uint64_t count) override;
  void WriteFailed(uint64_t first, uint64_t count) override;
  ScrubFinding ScrubGrain(uint64_t grain, uint64_t entry, const std::byte* stored, uint32_t length,
                          CheckMode mode) override;

  // The map entry of a checksum (a different name from the engine's Stored hook, which it
  // would hide).
  uint32_t EntryOf(uint32_t crc) const { return crc ^ zero_crc_; }
  uint64_t RegionOf(uint64_t grain) const { return grain / kPerRegion; }
  Status Format();
  Status Load();
  // Recomputes the checksums of every region a crash left dirty, from the data, and cleans
  // them; out of space below, they stay dirty (opening needs no new space).
  Status Recover();
  // Loads the checksums of region r's grains from the data below (the region is quiet).
  Status Recompute(uint64_t r);
  // Check's findings about bad_dirty_pages_: repaired when Recover rewrote them, corruption
  // for a damaged page still on disk, a note for a torn one.
  void ReportBadDirtyPages(CheckResult* out) const;
  bool AnyUnknown(uint64_t r) const;
  // Durably marks `regions` dirty before data is written to them. Blocks the caller.
  Status MarkDirty(const std::vector<uint64_t>& regions);
  Status WriteDirtyPages(const std::vector<uint64_t>& regions, IoFlags flags);

  Superblock sb_;
  const uint32_t zero_crc_;
  bool formatted_ = false;  // false: a read-only blank device (nothing on disk)
  DirtyRegions regions_;
  // A bit per grain whose write failed below: its checksum is unknown until a commit
  // recomputes it.
  AtomicBits unknown_;

  IoMutex meta_mu_;             // serialises metadata I/O (held across it)
  std::unique_ptr<SyncIo> io_;  // guarded by meta_mu_
  std::vector<uint8_t> dirty_;  // one byte per region, as on disk; guarded by meta_mu_
  uint64_t recovered_regions_ = 0;
  uint64_t torn_pages_ = 0;  // metadata pages a crash tore, found by Load (and recomputed)
  // Dirty-flag pages that failed their check at Load: torn by a crash (flags taken as read) or
  // damaged (every region taken as dirty). Check reports them.
  struct BadDirtyPage {
    uint64_t page, offset, first_region;
    bool damaged;
    uint64_t dirty;   // regions taken as dirty,
    uint64_t lo, hi;  // from region lo up to hi (exclusive)
  };
  std::vector<BadDirtyPage> bad_dirty_pages_;
  bool bad_dirty_pages_rewritten_ = false;  // by Recover, on a writable open
  std::atomic<uint64_t> last_mismatch_{UINT64_MAX};
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_CRC32C_CRC32C_DEVICE_H_
