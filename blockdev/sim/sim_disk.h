// SimDisk: the medium under a simulated device (sim_device.h). It holds what reads see, what
// is durable, and what a power cut may keep:
//
//  - Content: sparse 4 KiB pages (a page never written reads as zeros and takes no space).
//  - Durability, as docs/design.md states it: a write is volatile when it completes; a flush
//    makes durable every write that completed before the flush was submitted (its barrier,
//    completed() taken at submission); a FUA write is durable when it completes.
//  - A power cut (AfterPowerCut): the durable content, plus a seeded subset of the volatile
//    writes, applied in completion order, each landing whole, as a prefix of its sectors (a
//    torn write) or not at all. Requests in flight are not in the log: they never land.
//  - Length, as a file's (blockdev/file): Resize makes [old size, size) addressable (zeros) but
//    only writes that land there make it durable, so after a power cut the disk is as long as
//    its durable length (SetDurableLength), the durable writes and those that landed.
//    Shrinking is durable at once.
//  - Space: an optional budget of allocated pages; a write or write-zeroes that needs pages
//    beyond it fails with ENOSPC and changes nothing (a full file system). Deallocating
//    write-zeroes and discards free whole pages (a hole punch).
//
// Not thread-safe: a simulation runs every queue from one thread.
#ifndef VSTACK_BLOCKDEV_SIM_SIM_DISK_H_
#define VSTACK_BLOCKDEV_SIM_SIM_DISK_H_

#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <memory>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "blockdev/sim/sim_rng.h"

namespace vstack::sim {

class SimDisk {
 public:
  static constexpr uint64_t kPage = 4096;

  explicit SimDisk(uint64_t size) : size_(size), durable_length_(size) {}

  uint64_t size() const { return size_; }
  // Grows (the new range reads as zeros) or shrinks (at once durable).
  void Resize(uint64_t size);

  // Copies bytes [offset, offset + length) into `iov`.
  void Read(uint64_t offset, uint64_t length, const iovec* iov, uint32_t iovcnt) const;
  // Stores the first `land` bytes of the `length` bytes of `iov` at `offset` (land < length: a
  // torn write whose request fails). ENOSPC (nothing stored) past the budget.
  std::error_code Write(uint64_t offset, uint64_t length, const iovec* iov, uint32_t iovcnt,
                        bool fua, uint64_t land);
  // Zeros [offset, offset + length); `deallocate` frees the whole pages (write-zeroes with
  // kIoMayUnmap, discard), else they stay allocated.
  std::error_code Zero(uint64_t offset, uint64_t length, bool deallocate, bool fua);

  // Writes completed so far: the barrier of a flush submitted now.
  uint64_t completed() const { return seq_; }
  // A flush with `barrier` completed: every write that completed before it is durable.
  void Flush(uint64_t barrier);
  // The disk is `size` bytes long, durably: a file created at that length and synced (as
  // `vstack create` makes an image), not grown by Resize.
  void SetDurableLength(uint64_t size) {
    Resize(size);
    durable_length_ = size;
  }
  // Volatile writes (completed, not yet durable).
  size_t volatile_writes() const { return log_.size(); }

  // The disk a power cut now leaves: durable content plus each volatile write landing with
  // probability `land` (whole, or with probability `torn` a prefix of its 512-byte sectors).
  std::shared_ptr<SimDisk> AfterPowerCut(SimRng& rng, double land, double torn) const;
  // At most `pages` 4 KiB pages allocated from now on (UINT64_MAX: no limit).
  void set_page_budget(uint64_t pages) { budget_ = pages; }
  uint64_t allocated_pages() const { return current_.size(); }

  // True until the simulation has opened a stack on it once (BlockDevice::fresh).
  bool fresh() const { return fresh_; }
  void set_fresh(bool fresh) { fresh_ = fresh; }

 private:
  using Page = std::array<uint8_t, kPage>;
  using Pages = std::unordered_map<uint64_t, std::unique_ptr<Page>>;

  // A write, write-zeroes or discard that completed but is not durable yet.
  struct Change {
    uint64_t seq = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
    std::vector<uint8_t> data;  // empty: zeros
    bool deallocate = false;
    bool fua = false;
  };

  // Applies `c`'s first `length` bytes to `pages`.
  static void Apply(Pages& pages, const Change& c, uint64_t length);
  static Pages Copy(const Pages& pages);
  // Pages of [offset, offset + length) not allocated in current_.
  uint64_t NewPages(uint64_t offset, uint64_t length) const;
  std::error_code Record(Change c);

  uint64_t size_;
  uint64_t durable_length_;      // what a power cut leaves at least
  Pages current_;                // what reads see
  Pages durable_;                // what survives a power cut
  std::vector<Change> log_;      // volatile, in completion order
  uint64_t seq_ = 0;
  uint64_t budget_ = UINT64_MAX;
  bool fresh_ = true;
};

}  // namespace vstack::sim

#endif  // VSTACK_BLOCKDEV_SIM_SIM_DISK_H_
