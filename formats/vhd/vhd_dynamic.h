// The dynamic-disk engine: address translation through the BAT, sector bitmaps kept exact,
// and block allocation with group commit. State shared by every queue lives in DynamicState;
// each thread's queue is a DynamicQueue (vhd_dynamic.cc).
//
// Concurrency. Lookups of allocated, fully written blocks take no lock (atomic BAT entries and
// flags). Everything else (partial bitmaps, allocations) is decided under DynamicState::mu,
// and I/O is always submitted after the lock is released. Metadata I/O that several queues
// wait for (a bitmap write, a bitmap load, an allocation commit) is issued by one queue that
// itself has a request waiting for it, so it keeps polling until that I/O is done; requests of
// other queues are completed with PostCompletion, and work that must be redone on their own
// queue (re-translating a piece, issuing the next bitmap write, taking over the next commit)
// is handed to them through their inbox.
//
// Write order of an allocation commit (docs/layers/vhd.md): over a file, (1) if the blocks do
// not fit in the space reserved earlier, the footer at a new end of the file (reserving room
// for more blocks), written with FUA; (2) bitmaps, data and the changed BAT sectors together
// (reserved space is durable and reads as zeros, so a BAT entry that lands first shows an empty
// block). At close the unused reservation is given back. Over a fixed-size device, whose free space
// may hold old bytes: (1) bitmaps, data and zeros, flush; (2) the BAT sectors. Then the entries are
// published in memory and the writes complete. A crash at any point leaves a valid image: at worst
// the new blocks are leaked. A commit that fails after BAT sectors went down writes them again
// without its entries before its writes fail (a failed block must not reappear after a reopen).
#ifndef VSTACK_FORMATS_VHD_VHD_DYNAMIC_H_
#define VSTACK_FORMATS_VHD_VHD_DYNAMIC_H_

#include <array>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "formats/vhd/vhd_bat.h"
#include "formats/vhd/vhd_image.h"
#include "lib/block_device.h"

namespace vstack::vhd {

struct BitmapState;
struct Allocation;

struct DynamicState {
  // `reserve`: bytes of blocks to reserve beyond a commit's needs when the file grows.
  // Corrupt BAT entries (image.unusable) fail data I/O with Errc::kCorruption, unless
  // `recover` (vhd:recover=on, read-only): then blocks inside the file are read as stored, a
  // block the end of the file cuts reads the sectors left in the file (those past the end read
  // as unallocated), and a block whose bitmap is past the end reads as unallocated.
  DynamicState(BlockDevice& lower, const VhdImage& image, uint64_t reserve, bool recover = false);
  ~DynamicState();

  // Fixed at open.
  BlockDevice& lower;
  const uint32_t block_size;
  const uint32_t bitmap_bytes;
  const uint32_t sectors_per_block;
  const uint64_t bat_offset;
  const std::array<uint8_t, kFooterSize> footer_bytes;
  // Growable: new blocks go at the end footer, which moves (a file). Otherwise the footer stays
  // at `limit` and blocks fill the space before it.
  const bool growable;
  const uint64_t limit;
  // Growable: how many blocks' worth of space the file grows by beyond what a commit needs.
  const uint64_t reserve_blocks;
  // Differencing disks: the parent, read where this image's bits are clear (set once, before
  // any queue opens). Sectors past its end read as zeros.
  BlockDevice* parent = nullptr;
  Bat bat;

  std::mutex mu;
  uint64_t next_free;  // guarded by mu: where the next block may start
  // Growable: where the end footer is. [next_free, footer_at) is reserved space: durable,
  // zero, unused, so blocks placed in it need no flush. Guarded by mu.
  uint64_t footer_at;
  // Recover only, fixed at open: blocks the end of the file cuts -> data sectors still in it.
  // A bitmap read of one clears the bits from there on.
  std::unordered_map<uint32_t, uint32_t> cut_blocks;
  uint64_t unallocated = 0;  // mu: BAT entries of the disk still unallocated
  // The bitmaps of partially written blocks (full blocks need none). At most about
  // max_cached_bitmaps are kept: idle ones beyond are dropped and read again when needed.
  size_t max_cached_bitmaps = 16384;
  std::unordered_map<uint32_t, std::unique_ptr<BitmapState>> bitmaps;  // mu
  void EvictIdleBitmaps();                                             // REQUIRES: mu held
  std::unordered_map<uint32_t, Allocation*> allocating;                // blocks being allocated; mu
  std::vector<std::unique_ptr<Allocation>> open_group;                 // next commit's blocks; mu
  bool committing = false;  // mu: a queue holds the commit role
  // BAT sectors that a failed commit may have left on disk with entries memory does not have
  // (its undo failed too): the next commit writes them again, or the close
  // (RewriteStaleBat). Guarded by mu.
  std::vector<uint64_t> stale_bat_sectors;

  // Where the end footer is now.
  uint64_t FooterOffset();
  // Growable: gives back the reserved space at the end of the file (footer moved down to the
  // end of the last block, flush, truncate). Called at close, with no queue open.
  Status TrimReservation();
  // Writes the stale BAT sectors (a failed commit's undo that failed too, and no commit since)
  // as memory has them. Called at close, with no queue open, before the close's flush.
  Status RewriteStaleBat();
};

// A queue of a dynamic VHD. `device` is the VhdDevice the queue belongs to.
// `parent_queue`: differencing disks, a queue of state.parent for this thread; else null.
std::unique_ptr<IoQueue> NewDynamicQueue(BlockDevice& device, DynamicState& state,
                                         std::unique_ptr<IoQueue> lower,
                                         std::unique_ptr<IoQueue> parent_queue);

// Allocation over [offset, offset + length) of the virtual disk, per block and, for partially
// written blocks, per bitmap run (loading bitmaps that are not cached). Differencing disks
// report what the parent reports where this image's bits are clear (beyond the parent's end:
// a zero hole).
// With `own_only`, sectors this image does not hold are zero holes even in a differencing disk.
Status MapDynamicExtents(DynamicState& state, uint64_t offset, uint64_t length,
                         std::vector<Extent>* out, bool own_only = false);

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_DYNAMIC_H_
