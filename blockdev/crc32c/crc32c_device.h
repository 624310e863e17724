// crc32c: a CRC-32C per grain, stored persistently and verified on every read.
//
// Spec: crc32c[:grain=4K]+<lower>
//
// Data stays where it is on the device below, after the metadata (superblock, checksum table,
// dirty-region table). Every write computes the checksums of the grains it covers (a partial
// grain is a read-modify-write that first verifies the old content); every read verifies them.
// A mismatch completes the read with Errc::kChecksumMismatch, never with the bad data; the
// device counts it and remembers its offset (`vstack info`, `vstack check` lists them all).
// Crash consistency follows dm-integrity's bitmap mode (checksum_table.h). See
// docs/layers/crc32c.md.
#ifndef VSTACK_BLOCKDEV_CRC32C_CRC32C_DEVICE_H_
#define VSTACK_BLOCKDEV_CRC32C_CRC32C_DEVICE_H_

#include <atomic>
#include <memory>
#include <mutex>

#include "blockdev/crc32c/checksum_table.h"
#include "blockdev/grainmap/grain_layer.h"
#include "lib/progress.h"
#include "lib/sync_io.h"

namespace vstack {

class Crc32cDevice final : public GrainLayer {
 public:
  // Opens the crc32c metadata on `lower`. A blank device is formatted if it is fresh or
  // `format` (format=on) is given, else refused (OpenSuperblock); read-only, it is presented as
  // empty, all zeros. Recomputes the checksums of regions left dirty by a crash.
  static Result<DevicePtr> Open(DevicePtr lower, uint32_t grain, bool grain_given, bool read_only,
                                bool format);

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  std::optional<SpaceUsage> Space() const override;
  // Reads every grain and verifies its checksum (a scrub); names each bad grain's offset.
  Status Check(CheckMode mode, CheckResult* out) override;

  // For the queue.
  ChecksumTable& table() { return table_; }
  // Durably marks `regions` dirty before data is written to them. Blocks the caller.
  Status MarkDirty(const std::vector<uint64_t>& regions);
  // A flush: makes data durable and cleans the regions that went quiet. Blocks the caller.
  Status Commit(bool clean_all = false);
  // Records a checksum mismatch of the grain at virtual byte `offset`.
  void RecordMismatch(uint64_t offset);
  uint64_t mismatches() const { return mismatches_.load(); }
  uint64_t last_mismatch_offset() const { return last_mismatch_.load(); }

  enum Counter : size_t { kChecksumErrors, kRmwReads, kReadRetries, kRegionsMarked, kRegionsCleaned };

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;
  Status CloseLayer() override;

 private:
  Crc32cDevice(DevicePtr lower, uint32_t grain, Superblock sb, bool read_only);

  // Check without the release of the metadata queue.
  Status CheckGrains(CheckMode mode, CheckResult* out);
  Status WriteDirtyPages(const std::vector<uint64_t>& pages, IoFlags flags);
  Status Load();
  Status Recover();

  Superblock sb_;
  ChecksumTable table_;
  const bool read_only_;
  bool formatted_ = false;  // false: a read-only blank device (nothing on disk)

  IoMutex meta_mu_;                  // serialises metadata I/O (held across it)
  std::unique_ptr<SyncIo> io_;       // guarded by meta_mu_
  std::vector<uint8_t> dirty_;       // one byte per region, as on disk; guarded by meta_mu_
  uint64_t recovered_regions_ = 0;
  uint64_t torn_pages_ = 0;  // metadata pages a crash tore, found by Load (and recomputed)
  std::atomic<uint64_t> mismatches_{0};
  std::atomic<uint64_t> last_mismatch_{UINT64_MAX};
};

// The queue of a Crc32cDevice (crc32c_queue.cc).
std::unique_ptr<IoQueue> NewCrc32cQueue(Crc32cDevice& device, std::unique_ptr<IoQueue> lower);

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_CRC32C_CRC32C_DEVICE_H_
